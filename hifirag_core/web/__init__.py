"""The real web's shapes: pages that stand in for content (``blocked``), Reddit threads as comment trees
(``reddit``), publication dates (``page_dates``) and whether a run's crawling worked (``fetch_health``)."""
