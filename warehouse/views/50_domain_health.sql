-- One row per domain of each run: how its fetches went. A domain is the URL's host, lower-cased,
-- without "www." (the page's final URL after redirects, else the URL asked for).
--   fetches, questions    pages asked for, and by how many questions
--   statuses              every fetch status with its count, e.g. {ok=3, blocked=2}
--   ok, blocked, failed   fetched as content; a page standing in for it (a challenge, a captcha,
--                         a denial, a paywall, ...); any other failure (HTTP error, timeout, ...)
--   block_reasons         what stood in for the content, "<reason>:<vendor>"
--   empty                 fetched as content, yet no section came out of it (no text, a scanned PDF)
--   reused                taken from the page cache or pinned evidence rather than fetched again
--   all_blocked           every fetch of the domain was blocked (the run summary warns about these)
CREATE OR REPLACE VIEW domain_health AS
WITH p AS (
    SELECT run_id, question_id, url, status, block_reason, reused_from,
           regexp_extract(lower(coalesce(final_url, url)),
                          '^[a-z][a-z0-9+.-]*://(?:[^@/?#]*@)?(?:www\.)?([^/:?#]+)', 1) AS domain
    FROM pages
), s AS (
    SELECT run_id, question_id, url, count(*) FILTER (WHERE status = 'ok') AS sections_ok
    FROM sections GROUP BY run_id, question_id, url
)
SELECT p.run_id, p.domain,
       count(*)                                                            AS fetches,
       count(DISTINCT p.question_id)                                       AS questions,
       histogram(p.status)                                                 AS statuses,
       count(*) FILTER (WHERE p.status = 'ok')                             AS ok,
       count(*) FILTER (WHERE p.status = 'blocked')                        AS blocked,
       count(*) FILTER (WHERE p.status NOT IN ('ok', 'blocked'))           AS failed,
       coalesce(list_sort(list(DISTINCT p.block_reason) FILTER (WHERE p.block_reason IS NOT NULL)),
                []::VARCHAR[])                                             AS block_reasons,
       count(*) FILTER (WHERE p.status = 'ok' AND coalesce(s.sections_ok, 0) = 0) AS empty,
       count(*) FILTER (WHERE p.reused_from IS NOT NULL)                   AS reused,
       count(*) FILTER (WHERE p.status = 'blocked') = count(*)             AS all_blocked
FROM p LEFT JOIN s USING (run_id, question_id, url)
GROUP BY p.run_id, p.domain;
