-- Example queries over the warehouse views. Run one with:  hifirag sql "<query>"
-- or open warehouse/data/hifirag.duckdb with the DuckDB CLI (the views are defined there).

-- 1. Runs, newest first.
SELECT run_id, status, variant, n_questions, n_answered, cache_hits, llm_calls_paid, wall_seconds
FROM runs ORDER BY started_at DESC;

-- 2. One question end to end: the question, the sections the ranker kept for it, and the answer.
SELECT q.query, d.source_order, d.rank, d.heading, round(d.score, 3) AS score, a.text AS answer, a.cited_urls
FROM questions q
JOIN section_decisions d USING (run_id, question_id)
JOIN answers a USING (run_id, question_id)
WHERE q.run_id = (SELECT run_id FROM runs ORDER BY started_at DESC LIMIT 1)
  AND q.question_id = (SELECT min(question_id) FROM questions WHERE run_id = q.run_id)
  AND d.kept
ORDER BY d.source_order, d.rank;

-- 3. Where the time and money went, per stage.
SELECT * FROM stage_costs WHERE run_id = (SELECT run_id FROM runs ORDER BY started_at DESC LIMIT 1);

-- 4. How much each filter removed (the paper reports 33.5% of URLs and 60.5% of sections).
SELECT run_id,
       round(1 - avg(kept::INT), 3) AS share_of_urls_dropped
FROM url_decisions GROUP BY run_id;
SELECT run_id,
       round(1 - avg(kept::INT), 3) AS share_of_sections_dropped
FROM section_decisions GROUP BY run_id;

-- 5. Cache reuse: stages recomputed versus reused in each run.
SELECT run_id, count(*) FILTER (WHERE NOT cached) AS computed, count(*) FILTER (WHERE cached) AS reused
FROM stage_runs GROUP BY run_id;

-- 6. Crawl health of the latest run: domains whose fetches failed or were blocked, worst first.
SELECT domain, fetches, statuses, blocked, block_reasons, failed, empty, all_blocked
FROM domain_health
WHERE run_id = (SELECT run_id FROM runs ORDER BY started_at DESC LIMIT 1) AND ok < fetches
ORDER BY blocked + failed DESC, fetches DESC;

-- 7. What stood in for the content, over every run: challenge, captcha, denied, paywall, ...
SELECT block_reason, count(*) AS pages, count(DISTINCT regexp_extract(url, '://([^/]+)', 1)) AS hosts,
       any_value(error) AS example
FROM pages WHERE status = 'blocked' GROUP BY block_reason ORDER BY pages DESC;

-- 8. PDFs: how many were read, and what became of the others (scans, locked files, cut short).
SELECT s.status, count(DISTINCT s.url) AS pdfs
FROM pages p JOIN sections s USING (run_id, question_id, url)
WHERE p.kind = 'pdf' GROUP BY s.status;
