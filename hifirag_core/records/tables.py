"""Every warehouse table and the record type of its rows, in one explicit list.

The stage tables (``hifirag_core.records``), the evaluation's, the credibility experiment's and the
service's. The warehouse writer and its views read this; nothing registers itself at import time.
"""

from __future__ import annotations

from hifirag_core.records import RECORD_TYPES, Record
from hifirag_core.records.credibility import EXPERIMENT_RECORD_TYPES
from hifirag_core.records.evaluation import EVALUATION_RECORD_TYPES
from hifirag_core.records.serving import SERVING_RECORD_TYPES

TABLES: dict[str, type[Record]] = {
    cls.TABLE: cls
    for cls in (*RECORD_TYPES, *EVALUATION_RECORD_TYPES, *EXPERIMENT_RECORD_TYPES, *SERVING_RECORD_TYPES)
}
