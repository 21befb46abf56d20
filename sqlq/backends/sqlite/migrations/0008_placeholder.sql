-- sqlq schema 8: a placeholder for the number another branch takes (dropped at merge).
SELECT 1;
