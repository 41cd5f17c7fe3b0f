-- Where evidence is lost: for questions whose answer has a known place (the FAQ set: a page and a
-- section anchor), whether each stage still had it. A step can only hold what the one before it
-- passed on, so the shares fall from left to right; the first FALSE is where it was lost. A variant that
-- looks again reads pages in several rounds: each step counts every round, and gold_kept_round says in
-- which round the gold section was first kept (0 the first pass, NULL never).
CREATE OR REPLACE VIEW evidence_funnel AS
SELECT q.run_id, q.question_id, q.query, q.gold_url, q.gold_anchor,
       EXISTS (SELECT 1 FROM search_results s
               WHERE s.run_id = q.run_id AND s.question_id = q.question_id
                 AND split_part(s.url, '#', 1) = q.gold_url)                          AS in_search_results,
       EXISTS (SELECT 1 FROM url_decisions u
               WHERE u.run_id = q.run_id AND u.question_id = q.question_id
                 AND split_part(u.url, '#', 1) = q.gold_url AND u.kept)               AS kept_by_url_filter,
       EXISTS (SELECT 1 FROM pages p
               WHERE p.run_id = q.run_id AND p.question_id = q.question_id
                 AND split_part(p.url, '#', 1) = q.gold_url AND p.status = 'ok')      AS fetched,
       EXISTS (SELECT 1 FROM sections s
               WHERE s.run_id = q.run_id AND s.question_id = q.question_id
                 AND split_part(s.url, '#', 1) = q.gold_url
                 AND (s.anchor = q.gold_anchor OR s.heading = q.query))               AS gold_section_parsed,
       EXISTS (SELECT 1 FROM section_decisions d JOIN sections s USING (run_id, question_id, section_id)
               WHERE d.run_id = q.run_id AND d.question_id = q.question_id AND d.kept
                 AND split_part(s.url, '#', 1) = q.gold_url
                 AND (s.anchor = q.gold_anchor OR s.heading = q.query))               AS gold_section_kept,
       (SELECT min(d.round) FROM section_decisions d JOIN sections s USING (run_id, question_id, section_id)
         WHERE d.run_id = q.run_id AND d.question_id = q.question_id AND d.kept
           AND split_part(s.url, '#', 1) = q.gold_url
           AND (s.anchor = q.gold_anchor OR s.heading = q.query))                     AS gold_kept_round,
       (SELECT coalesce(max(r.round), 0) FROM stage_runs r
         WHERE r.run_id = q.run_id AND r.question_id = q.question_id)                 AS rounds,
       coalesce(list_contains(a.cited_urls, q.gold_url), false)                     AS cited
FROM questions q
LEFT JOIN answers a USING (run_id, question_id)
WHERE q.gold_url IS NOT NULL;

-- The funnel of each run in one row: questions with a known answer place, and the share still
-- holding the gold evidence after each stage; then the share whose gold section was first kept in a
-- follow-up round (a variant that looks again) and the mean number of follow-up rounds per question.
CREATE OR REPLACE VIEW evidence_funnel_summary AS
SELECT f.run_id, r.variant, count(*) AS questions,
       round(avg(in_search_results::INT), 3)   AS in_search_results,
       round(avg(kept_by_url_filter::INT), 3)  AS kept_by_url_filter,
       round(avg(fetched::INT), 3)             AS fetched,
       round(avg(gold_section_parsed::INT), 3) AS gold_section_parsed,
       round(avg(gold_section_kept::INT), 3)   AS gold_section_kept,
       round(avg(cited::INT), 3)               AS cited,
       round(avg(coalesce(gold_kept_round > 0, false)::INT), 3) AS kept_in_follow_up,
       round(avg(rounds), 3)                   AS follow_up_rounds
FROM evidence_funnel f LEFT JOIN runs r USING (run_id)
GROUP BY f.run_id, r.variant;
