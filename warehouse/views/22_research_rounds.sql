-- Looking again (the final_deep variant): one row per question of a run that checked its evidence, with
-- how many follow-up rounds it ran, the searches each round added, the new URLs and sections each round
-- kept, what the first check and the last check said, and the model calls and cost of each round (round 0
-- is the first pass). A question that never looked again has rounds = 0.
CREATE OR REPLACE VIEW research_rounds AS
WITH checked AS (  -- every round of every question whose evidence was checked
    SELECT DISTINCT r.run_id, r.question_id, r.round FROM stage_runs r
    WHERE EXISTS (SELECT 1 FROM sufficiency_checks c WHERE c.run_id = r.run_id AND c.question_id = r.question_id)
),
per_round AS (
    SELECT s.run_id, s.question_id, s.round,
           (SELECT any_value(p.queries) FROM query_plans p
             WHERE p.run_id = s.run_id AND p.question_id = s.question_id AND p.round = s.round
               AND p.stage = CASE WHEN s.round = 0 THEN 'query_plan' ELSE 'followup' END)     AS queries,
           (SELECT count(*) FILTER (WHERE u.kept) FROM url_decisions u
             WHERE u.run_id = s.run_id AND u.question_id = s.question_id AND u.round = s.round) AS urls_kept,
           (SELECT count(*) FILTER (WHERE p.status = 'ok') FROM pages p
             WHERE p.run_id = s.run_id AND p.question_id = s.question_id AND p.round = s.round) AS pages_read,
           (SELECT count(*) FILTER (WHERE d.kept) FROM section_decisions d
             WHERE d.run_id = s.run_id AND d.question_id = s.question_id AND d.round = s.round) AS sections_kept,
           c.verdict, c.missing,
           (SELECT count(*) FROM llm_calls l
             WHERE l.run_id = s.run_id AND l.question_id = s.question_id AND l.round = s.round
               AND NOT coalesce(l.cache_hit, false))                                          AS paid_calls,
           (SELECT coalesce(sum(l.cost_usd), 0) FROM llm_calls l
             WHERE l.run_id = s.run_id AND l.question_id = s.question_id AND l.round = s.round
               AND NOT coalesce(l.cache_hit, false))                                          AS cost_usd,
           (SELECT sum(r.seconds) FROM stage_runs r
             WHERE r.run_id = s.run_id AND r.question_id = s.question_id AND r.round = s.round) AS seconds
    FROM checked s
    LEFT JOIN sufficiency_checks c USING (run_id, question_id, round)
)
SELECT run_id, question_id,
       max(round)                                                    AS rounds,
       list(queries ORDER BY round) FILTER (WHERE round > 0)         AS follow_up_queries,
       sum(urls_kept) FILTER (WHERE round > 0)                       AS new_urls_kept,
       sum(pages_read) FILTER (WHERE round > 0)                      AS new_pages_read,
       sum(sections_kept) FILTER (WHERE round > 0)                   AS new_sections_kept,
       arg_min(verdict, round) FILTER (WHERE verdict IS NOT NULL)    AS sufficiency_before,
       arg_max(verdict, round) FILTER (WHERE verdict IS NOT NULL)    AS sufficiency_after,
       arg_max(missing, round) FILTER (WHERE verdict IS NOT NULL)    AS still_missing,
       list(paid_calls ORDER BY round)                               AS paid_calls_per_round,
       list(round(cost_usd, 6) ORDER BY round)                       AS cost_usd_per_round,
       list(round(seconds, 2) ORDER BY round)                        AS seconds_per_round
FROM per_round
GROUP BY run_id, question_id;
