-- Each evaluation's per-question scores beside the answer run they scored: join with answers,
-- questions or any stage view on (run_id, question_id). The scores table itself is partitioned by
-- the evaluation id, so an evaluation keeps its figures after its run is recomputed.
CREATE OR REPLACE VIEW evaluation_scores AS
SELECT s.run_id AS evaluation_id, e.scored_run_id AS run_id, s.variant, s.dataset, s.question_id, s.metric,
       s.value, s.detail_json, e.verdict, e.finished_at
FROM scores s
JOIN evaluations e ON e.run_id = s.run_id AND e.variant = s.variant;

-- Each evaluation's metrics per variant with their intervals and the paired difference to the
-- baseline evaluation; not_gated_reason says why a gated metric was only reported for that variant
-- (it passes by construction).
CREATE OR REPLACE VIEW evaluation_summary AS
SELECT m.run_id AS evaluation_id, e.dataset, m.variant, e.scored_run_id AS run_id, m.metric, m.n, m.n_missing,
       round(m.mean, 4) AS mean, round(m.low, 4) AS low, round(m.high, 4) AS high,
       m.baseline_evaluation_id, round(m.diff, 4) AS diff, round(m.diff_low, 4) AS diff_low,
       round(m.diff_high, 4) AS diff_high, m.regressed, m.gated, m.not_gated_reason, e.verdict, e.finished_at
FROM evaluation_metrics m
JOIN evaluations e ON e.run_id = m.run_id AND e.variant = m.variant;
