-- Follow-up turns (beyond the paper): the turns of each thread, one row per turn, the first included, in order.
-- A thread is named by its first turn's answer id (thread_id, <run_id>/<question_id>); each later turn has a
-- `turns` row naming that first turn and the answer it follows (follows), and may live in another run (the
-- service's run of another day, a batch run). read_as is the question as the pipeline read it: a follow-up's
-- query plan restated it to stand alone. earlier_pages and earlier_sections: what the followed answer kept, offered
-- to the turn's evidence; carried_pages and carried_sections: of those, what joined it (the pages the turn did not
-- read again itself: pages.reused_from = 'turn:<answer id>'); carried_kept: of the carried sections, the ones the
-- turn's section ranking kept when it judged them again; cited_from_earlier: sections the turn's answer cites that
-- the followed turn had kept (read again from their pages, or carried).
CREATE OR REPLACE VIEW thread_turns AS
WITH every_turn AS (
    SELECT thread_run_id, thread_question_id, turn, run_id, question_id, follows_run_id, follows_question_id,
           earlier_pages, earlier_sections
    FROM turns
    UNION ALL BY NAME
    SELECT DISTINCT thread_run_id, thread_question_id, 1 AS turn, thread_run_id AS run_id,
           thread_question_id AS question_id
    FROM turns
), plans AS (
    SELECT run_id, question_id, any_value(question) AS read_as
    FROM query_plans WHERE stage = 'query_plan' AND round = 0 GROUP BY run_id, question_id
), carried AS (  -- the pages carried from the answer a turn follows, and the turn's ranking of their sections
    SELECT p.run_id, p.question_id, count(DISTINCT p.url) AS carried_pages, count(d.section_id) AS carried_sections,
           count(*) FILTER (WHERE d.kept) AS carried_kept
    FROM pages p
    LEFT JOIN section_decisions d ON d.run_id = p.run_id AND d.question_id = p.question_id AND d.round = p.round
                                 AND d.url = p.url
    WHERE p.reused_from LIKE 'turn:%' AND p.status = 'ok'
    GROUP BY p.run_id, p.question_id
), cited_earlier AS (  -- sections the turn cites that the turn it follows kept
    SELECT l.run_id, l.question_id, count(DISTINCT l.section_id) AS cited_from_earlier
    FROM citation_ledger l
    JOIN turns t ON t.run_id = l.run_id AND t.question_id = l.question_id
    WHERE EXISTS (SELECT 1 FROM section_decisions d WHERE d.run_id = t.follows_run_id
                    AND d.question_id = t.follows_question_id AND d.kept AND d.section_id = l.section_id)
    GROUP BY l.run_id, l.question_id
)
SELECT t.thread_run_id || '/' || t.thread_question_id                        AS thread_id,
       t.turn,
       t.run_id || '/' || t.question_id                                      AS answer_id,
       t.run_id, t.question_id,
       CASE WHEN t.follows_run_id IS NOT NULL THEN t.follows_run_id || '/' || t.follows_question_id END AS follows,
       q.query                                                               AS question,
       coalesce(p.read_as, q.query)                                          AS read_as,
       a.status                                                              AS answer_status,
       a.text                                                                AS answer,
       coalesce(a.cited_urls, [])                                            AS cited_urls,
       coalesce(t.earlier_pages, 0)                                          AS earlier_pages,
       coalesce(t.earlier_sections, 0)                                       AS earlier_sections,
       coalesce(c.carried_pages, 0)                                          AS carried_pages,
       coalesce(c.carried_sections, 0)                                       AS carried_sections,
       coalesce(c.carried_kept, 0)                                           AS carried_kept,
       coalesce(e.cited_from_earlier, 0)                                     AS cited_from_earlier
FROM every_turn t
LEFT JOIN questions q ON q.run_id = t.run_id AND q.question_id = t.question_id
LEFT JOIN answers a ON a.run_id = t.run_id AND a.question_id = t.question_id
LEFT JOIN plans p ON p.run_id = t.run_id AND p.question_id = t.question_id
LEFT JOIN carried c ON c.run_id = t.run_id AND c.question_id = t.question_id
LEFT JOIN cited_earlier e ON e.run_id = t.run_id AND e.question_id = t.question_id
ORDER BY thread_id, t.turn;
