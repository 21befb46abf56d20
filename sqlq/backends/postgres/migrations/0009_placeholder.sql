-- sqlq schema 9 on PostgreSQL: a placeholder for the number another branch takes
-- (dropped at merge).
SELECT 1;
