"""The `meta` table: which embedding model and dimension the store was built with (its
stamp: every vector in it comes from that model, and another one is refused), and what the
store records about its vector index that Lance's index statistics do not tell."""

from __future__ import annotations

from dataclasses import dataclass

import lancedb
import pyarrow as pa
from lancedb.table import Table

from services.index.errors import StoreModelMismatch
from services.index.store.schema import META, META_SCHEMA

# The key under which the vector index's partition count is kept.
IVF_PARTITIONS_KEY = "ivf_partitions"


@dataclass(frozen=True)
class ModelStamp:
    """The embedding model a store was built with; every vector in it comes from this one."""

    model: str
    dim: int


def values(db: lancedb.DBConnection) -> dict[str, str]:
    """The `meta` table as a dict."""
    rows = db.open_table(META).search().limit(None).to_arrow().to_pylist()
    return {str(r["key"]): str(r["value"]) for r in rows}


def read_stamp(db: lancedb.DBConnection) -> ModelStamp | None:
    rows = values(db)
    if "model" not in rows or "dim" not in rows:
        return None
    return ModelStamp(model=rows["model"], dim=int(rows["dim"]))


def create_stamp(db: lancedb.DBConnection, model: str, dim: int) -> ModelStamp:
    """Record `model`/`dim` unless another writer got there first; the stamp that holds."""
    meta = pa.table(
        {"key": ["model", "dim", "schema"], "value": [model, str(dim), "1"]}, schema=META_SCHEMA
    )
    db.create_table(META, data=meta, exist_ok=True)
    return read_stamp(db) or ModelStamp(model=model, dim=dim)


def record(db: lancedb.DBConnection, key: str, value: str) -> tuple[Table, int]:
    """Set `key`; the table handle that committed it and the version it made (for the
    writer guard)."""
    row = pa.table({"key": [key], "value": [value]}, schema=META_SCHEMA)
    table = db.open_table(META)
    merge = table.merge_insert("key").when_matched_update_all().when_not_matched_insert_all()
    return table, merge.execute(row).version


def check_model(stamp: ModelStamp | None, model: str | None, dim: int) -> None:
    """Refuse vectors of another model or width than the store's (none yet: anything goes)."""
    if stamp is None:
        return
    if dim != stamp.dim or (model is not None and model != stamp.model):
        raise StoreModelMismatch(stamp.model, stamp.dim, model, dim)
