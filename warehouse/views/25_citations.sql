-- Per run: how the citation stage cited the answers' sentences. cited_share is the share of claim
-- sentences with a source; by_method counts the sentences per deciding method (offline+marker,
-- llm+support, writer+marker, ...); mean_support is over the cited sentences whose support was measured.
CREATE OR REPLACE VIEW citation_summary AS
SELECT s.run_id, r.variant,
       count(DISTINCT s.question_id)                          AS questions,
       count(*)                                               AS sentences,
       round(avg((len(s.urls) > 0)::INT), 3)                  AS cited_share,
       round(avg(s.support) FILTER (WHERE len(s.urls) > 0), 3) AS mean_support,
       histogram(s.method)                                    AS by_method
FROM answer_sentences s LEFT JOIN runs r USING (run_id)
GROUP BY s.run_id, r.variant;
