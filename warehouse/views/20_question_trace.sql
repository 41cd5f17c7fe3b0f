-- One row per question of each run: how much evidence each stage kept (over every round), the follow-up
-- rounds a variant that looks again ran, and the answer.
CREATE OR REPLACE VIEW question_trace AS
SELECT q.run_id, q.question_id, q.query,
       (SELECT list_value(count(*), count(*) FILTER (WHERE kept)) FROM url_decisions u
         WHERE u.run_id = q.run_id AND u.question_id = q.question_id)            AS urls_seen_kept,
       (SELECT count(*) FILTER (WHERE p.status = 'ok') FROM pages p
         WHERE p.run_id = q.run_id AND p.question_id = q.question_id)           AS pages_fetched,
       (SELECT list_value(count(*), count(*) FILTER (WHERE kept)) FROM section_decisions d
         WHERE d.run_id = q.run_id AND d.question_id = q.question_id)           AS sections_seen_kept,
       (SELECT coalesce(max(r.round), 0) FROM stage_runs r
         WHERE r.run_id = q.run_id AND r.question_id = q.question_id)           AS rounds,
       a.status AS answer_status, a.n_words AS answer_words, a.cited_urls, a.text AS answer,
       a.answerability, a.answerability_score, a.abstained
FROM questions q
LEFT JOIN answers a USING (run_id, question_id);
