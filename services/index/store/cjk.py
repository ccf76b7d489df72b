"""Keyword search in Chinese, Japanese and Korean.

The full-text index cuts text into words at spaces and punctuation, and these scripts put no
spaces between words: "熊猫是中国的国宝" is one token, so a search for 熊猫 found nothing by
keyword. Each chunk therefore also stores its CJK text as overlapping character pairs (and
single characters), in `cjk_terms`, under a full-text index of its own that cuts at spaces
only, as search engines without a dictionary do (Lucene's CJK bigrams). A query that holds
such text asks both indexes (`ranking.fts_leg`): its CJK runs as pairs, or as the single
character a one-character run is, and the rest of its words as before.

Chunks without CJK text store "" (the index then has nothing to hold for them). A chunks
table from an older release gets the column on the writer's open (`tables.upgrade_chunks`):
"" computed by LanceDB for every row without CJK text, so that a large store of other
languages is not read into memory, and the terms of the rest computed here.
"""

from __future__ import annotations

import re

# Han (with the CJK extensions and compatibility ideographs), kana, and Hangul syllables
# and jamo. The same classes in the regular-expression syntax LanceDB's SQL understands.
_CLASSES = r"\p{Han}\p{Hiragana}\p{Katakana}\p{Hangul}"
_RUN = re.compile(
    "[\u3040-\u30ff\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
    "\uff66-\uff9f\u1100-\u11ff\u3130-\u318f\uac00-\ud7af\U00020000-\U0003134f]+"
)
# What `cjk_terms` is on adding the column to an older table: "" where the content holds
# no CJK character, NULL (to be computed) where it does.
WITHOUT_CJK_SQL = f"nullif(regexp_replace(content, '^[^{_CLASSES}]*$', ''), content)"


def has_cjk(text: str) -> bool:
    return _RUN.search(text) is not None


def _pairs(run: str) -> list[str]:
    return [run[i : i + 2] for i in range(len(run) - 1)]


def index_terms(text: str) -> str:
    """The CJK text of `text` as the index stores it: each run's characters and each pair of
    neighbours, separated by spaces; "" when there is none."""
    return " ".join(t for run in _RUN.findall(text) for t in [*run, *_pairs(run)])


def query_terms(text: str) -> str:
    """The CJK text of a query as terms: each run's pairs, or the run itself when it is one
    character (pairs rank what the query says; single characters would match most text)."""
    return " ".join(t for run in _RUN.findall(text) for t in (_pairs(run) or [run]))
