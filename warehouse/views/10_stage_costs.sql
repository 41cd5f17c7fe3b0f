-- Time, calls, tokens and cost per stage of each run. Paid calls are the ones not reused from the
-- stage cache that a model answered and billed (it reported tokens); unbilled ones reached no model
-- or got no billed answer (a refused connection, an HTTP error, a timeout). Reused calls keep the
-- tokens and cost of the run that paid for them. cpu_seconds: the CPU time of the stages this run
-- computed (the stage's thread and the worker threads it ran). Search calls (search_calls) count the same
-- way: asked ones were sent to the provider; reused ones came from the stage cache or the search cache;
-- search_cost_usd is what the paid providers charged (limits.call_cost_usd, or what a reply said), and
-- cost_usd is the stage's whole cost, model and search calls together.
CREATE OR REPLACE VIEW stage_costs AS
WITH timing AS (
    SELECT run_id, stage,
           count(*)                                 AS question_stages,
           count(*) FILTER (WHERE NOT cached)       AS computed,
           count(*) FILTER (WHERE cached)           AS from_cache,
           count(*) FILTER (WHERE status <> 'ok')   AS not_ok,
           round(sum(seconds), 3)                   AS seconds,
           round(sum(cpu_seconds) FILTER (WHERE NOT cached), 3) AS cpu_seconds
    FROM stage_runs GROUP BY run_id, stage
), calls AS (
    SELECT run_id, stage,
           count(*) FILTER (WHERE NOT cache_hit AND tokens_in IS NOT NULL) AS llm_calls_paid,
           count(*) FILTER (WHERE NOT cache_hit AND tokens_in IS NULL)   AS llm_calls_unbilled,
           count(*) FILTER (WHERE cache_hit)                              AS llm_calls_reused,
           sum(tokens_in) FILTER (WHERE NOT cache_hit)                    AS tokens_in,
           sum(tokens_out) FILTER (WHERE NOT cache_hit)                   AS tokens_out,
           sum(tokens_thinking) FILTER (WHERE NOT cache_hit)              AS tokens_thinking,
           round(sum(cost_usd) FILTER (WHERE NOT cache_hit), 6)           AS cost_usd,
           round(avg(latency_s) FILTER (WHERE NOT cache_hit), 3)          AS mean_latency_s
    FROM llm_calls GROUP BY run_id, stage
), searches AS (
    SELECT run_id, stage,
           count(*) FILTER (WHERE NOT cache_hit AND NOT cached_answer)    AS search_calls_asked,
           count(*) FILTER (WHERE cache_hit OR cached_answer)             AS search_calls_reused,
           sum(rate_limited) FILTER (WHERE NOT cache_hit)                 AS search_rate_limited,
           round(sum(backoff_s) FILTER (WHERE NOT cache_hit), 3)          AS search_backoff_s,
           round(sum(cost_usd) FILTER (WHERE NOT cache_hit), 6)           AS search_cost_usd
    FROM search_calls GROUP BY run_id, stage
)
SELECT t.run_id, t.stage, t.question_stages, t.computed, t.from_cache, t.not_ok, t.seconds,
       coalesce(c.llm_calls_paid, 0) AS llm_calls_paid, coalesce(c.llm_calls_unbilled, 0) AS llm_calls_unbilled,
       coalesce(c.llm_calls_reused, 0) AS llm_calls_reused,
       c.tokens_in, c.tokens_out, c.tokens_thinking,
       round(coalesce(c.cost_usd, 0) + coalesce(s.search_cost_usd, 0), 6) AS cost_usd, c.mean_latency_s,
       t.cpu_seconds,
       coalesce(s.search_calls_asked, 0) AS search_calls_asked,
       coalesce(s.search_calls_reused, 0) AS search_calls_reused,
       coalesce(s.search_rate_limited, 0) AS search_rate_limited, coalesce(s.search_backoff_s, 0) AS search_backoff_s,
       coalesce(s.search_cost_usd, 0) AS search_cost_usd
FROM timing t LEFT JOIN calls c USING (run_id, stage) LEFT JOIN searches s USING (run_id, stage);
