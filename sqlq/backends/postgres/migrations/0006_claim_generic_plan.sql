-- sqlq schema 6 on PostgreSQL: the claim keeps one plan per session.
--
-- A PL/pgSQL statement is planned through the plan cache: custom plans (for the
-- parameters of each call) first, then the generic plan if its estimated cost is no
-- worse. The claim's generic plan is estimated dearer (LIMIT p_n and delay_until <=
-- p_now have no values to go by), so every call was planned anew: measured 0.45-0.55
-- ms a claim against 0.17-0.19 ms with the generic plan, whose shape is the same (each
-- probe on its state's partial index; tests/unit/test_queries.py checks that no probe
-- scans the table). Set on the function, the mode holds for the statements it runs,
-- the claim inside sqlq_delete_and_claim and sqlq_delete_and_claim_many included, and
-- nowhere else.

ALTER FUNCTION sqlq_claim(text[], bigint, text, integer)
    SET plan_cache_mode = force_generic_plan;
