-- Why an answer says what it says: one row per answer sentence and source cited for it (one row with
-- NULL sources for a sentence that cites none). For each: the answer's [marker] of that source, the
-- section that supports the sentence (id and heading path), the source sentence closest to it, the
-- support score and what decided the citation (a model, the offline check, or the writer's own marker),
-- and the page snapshot the section came from: the content hash of the stored bytes (blobs/<2>/<hash>
-- under the data root, readable after the live page changes or disappears), the fetch time and the
-- final URL after redirects.
CREATE OR REPLACE VIEW citation_ledger AS
WITH links AS (
    SELECT run_id, question_id, sentence_index, sentence, method, marked,
           unnest(generate_series(1, len(urls)))  AS source_rank,  -- 1: the source that decided
           unnest(source_indices)                 AS source_index,
           unnest(urls)                           AS url,
           unnest(section_ids)                    AS section_id,
           unnest(evidence)                       AS evidence,
           unnest(evidence_scores)                AS evidence_score,
           support
    FROM answer_sentences WHERE len(urls) > 0
    UNION ALL BY NAME
    SELECT run_id, question_id, sentence_index, sentence, method, marked, NULL AS source_rank
    FROM answer_sentences WHERE len(urls) = 0
), sections_once AS (  -- a page read in two rounds has its sections twice
    SELECT run_id, question_id, section_id, any_value(heading_path) AS heading_path,
           any_value(anchor) AS anchor, any_value(url) AS section_url
    FROM sections GROUP BY run_id, question_id, section_id
), snapshots AS (  -- the newest good fetch of each page a question read
    SELECT run_id, question_id, url, arg_max(content_sha256, fetched_at) AS content_sha256,
           max(fetched_at) AS fetched_at, arg_max(coalesce(final_url, url), fetched_at) AS final_url,
           arg_max(reused_from, fetched_at) AS reused_from
    FROM pages WHERE status = 'ok' AND content_sha256 IS NOT NULL GROUP BY run_id, question_id, url
)
SELECT l.run_id, l.question_id, l.sentence_index, l.sentence,
       list_position(a.cited_urls, l.url)                       AS marker,
       l.source_rank, l.source_index, l.url,
       nullif(l.section_id, '')                                 AS section_id,
       s.heading_path, s.anchor,
       nullif(l.evidence, '')                                   AS supporting_sentence,
       round(coalesce(l.evidence_score, CASE WHEN l.source_rank = 1 THEN l.support END), 4) AS support,
       CASE WHEN l.source_rank IS NULL THEN NULL
            WHEN l.method LIKE 'llm%' THEN 'model'
            WHEN l.method LIKE 'offline%' THEN 'offline check'
            WHEN l.method LIKE 'writer%' THEN 'writer marker'
            ELSE l.method END                                   AS support_method,
       l.method                                                 AS decided_by,
       p.content_sha256, p.fetched_at, p.final_url, p.reused_from
FROM links l
LEFT JOIN answers a USING (run_id, question_id)
LEFT JOIN sections_once s ON s.run_id = l.run_id AND s.question_id = l.question_id AND s.section_id = l.section_id
LEFT JOIN snapshots p ON p.run_id = l.run_id AND p.question_id = l.question_id
                     AND p.url = coalesce(s.section_url, l.url);
