"""`decode_bodies`: message bodies (JSON, or Arrow IPC streams) into columns, on any
DataFrame with a ``body`` column (what the ``remoting`` source reads, streaming or not).

JSON is decoded by Spark itself (``from_json``, in the JVM, PERMISSIVE): one row per message.
Arrow is decoded in Python (``mapInArrow``): one row per row of each body's stream, its
columns taken by name and cast to the schema. A body that does not decode (not JSON, not an
object, a field of the wrong type, empty; not an Arrow stream, a column missing or not
castable) is handled by ``on_error``: ``"raise"`` fails the query with Spark's
``USER_RAISED_EXCEPTION`` and a message naming the offset (a filter, so the optimiser cannot
drop it), ``"null"`` keeps the message as one row with its fields null and a ``body_error``
column saying why (null for the good ones). A row the query filters out on the source's own
columns may be dropped before its body is decoded (Spark pushes such a filter below the
decode), and then raises nothing.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Final, Literal

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping

    import pyarrow as pa
    from pyspark.sql import DataFrame
    from pyspark.sql.types import StructType

__all__ = ["ERROR_COLUMN", "decode_bodies"]

ERROR_COLUMN: Final = "body_error"
_CORRUPT: Final = "__remoting_corrupt_record"
_PARSED: Final = "__remoting_parsed"


def decode_bodies(df: DataFrame, schema: StructType | str, *,
                  format: Literal["json", "arrow"] = "json",  # noqa: A002 (from_json's word)
                  on_error: Literal["raise", "null"] = "raise",
                  options: Mapping[str, str] | None = None) -> DataFrame:
    """Return ``df`` with its ``body`` column replaced by the fields of ``schema``.

    Args:
        df: a DataFrame with a binary (or string) ``body`` column, e.g. from
            ``spark.readStream.format("remoting")``; its other columns are kept.
        schema: the fields of a body: a `StructType` or a DDL string (``"id long, name
            string"``).
        format: ``"json"`` (a JSON object per body) or ``"arrow"`` (an Arrow IPC stream per
            body, any number of rows).
        on_error: ``"raise"`` (a body that does not decode fails the query, naming its
            offset) or ``"null"`` (its fields are null, and column ``body_error`` says why).
        options: ``from_json`` options for JSON (``timestampFormat``...).

    Raises:
        TypeError, ValueError: no ``body`` column, a bad ``format`` or ``on_error``, a field
            of ``schema`` named as a column ``df`` keeps (or ``body_error``).
    """
    from pyspark.sql.types import StructType

    if format not in ("json", "arrow"):
        raise ValueError(f"format must be 'json' or 'arrow', got {format!r}")
    if on_error not in ("raise", "null"):
        raise ValueError(f"on_error must be 'raise' or 'null', got {on_error!r}")
    if "body" not in df.columns:
        raise ValueError(f"decode_bodies needs a column body, the DataFrame has "
                         f"{', '.join(df.columns)}")
    if not isinstance(schema, StructType | str):
        raise TypeError(f"schema must be a StructType or a DDL string of fields, got "
                        f"{type(schema).__name__}")
    fields = schema if isinstance(schema, StructType) else StructType.fromDDL(schema)
    if not isinstance(fields, StructType):  # a DDL of one type ("int"), not of fields
        raise TypeError(f"schema must name fields (\"id long, name string\"), got {schema!r}")
    keep = [c for c in df.columns if c != "body"]
    clash = sorted(set(fields.fieldNames()) & {*keep, ERROR_COLUMN})
    if clash:
        raise ValueError(f"the schema's fields {', '.join(clash)} are columns the result keeps "
                         "already: rename them, or drop those columns first")
    if format == "json":
        decoded = _json(df, fields, keep, dict(options or {}), raising=on_error == "raise")
    else:
        decoded = _arrow(df, fields, keep)
    if on_error == "null":
        return decoded
    return _raising(decoded, "offset" in keep).drop(ERROR_COLUMN)


def _json(df: DataFrame, fields: StructType, keep: list[str], options: dict[str, str], *,
          raising: bool) -> DataFrame:
    from pyspark.sql import functions as F
    from pyspark.sql.types import StringType, StructField, StructType

    with_corrupt = StructType([*fields.fields, StructField(_CORRUPT, StringType())])
    parsed = F.from_json(F.col("body").cast("string"), with_corrupt,
                         {**options, "mode": "PERMISSIVE",
                          "columnNameOfCorruptRecord": _CORRUPT})
    error = (F.when(F.length("body") == 0, F.lit("an empty body"))
             .when(F.col(_PARSED).isNull() | F.col(_PARSED)[_CORRUPT].isNotNull(),
                   F.lit("not a JSON object of the schema")))
    if raising:
        # Spark pushes a filter below the projection it reads, the projection's expressions
        # inlined (PushPredicateThroughNonJoin): `_raising`'s filter then parsed each body
        # twice more (1.8x the time of a decode, 200,000 bodies, local[2]). A filter on a
        # generator's output stays above the generator: one parse a body.
        staged = df.select(*keep, F.inline(F.array(F.struct("body", parsed.alias(_PARSED)))))
    else:
        staged = df.select(*keep, "body", parsed.alias(_PARSED))
    staged = staged.withColumn(ERROR_COLUMN, error)
    good = F.col(ERROR_COLUMN).isNull()
    return staged.select(*keep, *[F.when(good, F.col(_PARSED)[name]).alias(name)
                                  for name in fields.fieldNames()], ERROR_COLUMN)


def _arrow(df: DataFrame, fields: StructType, keep: list[str]) -> DataFrame:
    from pyspark.sql.types import StringType, StructField, StructType

    out = StructType([*[df.schema[c] for c in keep], *fields.fields,
                      StructField(ERROR_COLUMN, StringType())])
    return df.mapInArrow(functools.partial(_decode_arrow, fields=fields, keep=keep), out)


def _raising(df: DataFrame, has_offset: bool) -> DataFrame:
    from pyspark.sql import functions as F

    where = (F.concat(F.lit("the body at offset "), F.col("offset").cast("string"))
             if has_offset else F.lit("a body"))
    message = F.concat(F.lit("remoting.spark: "), where, F.lit(" does not decode: "),
                       F.col(ERROR_COLUMN), F.lit("; fix its producer, or decode with "
                                                  "on_error='null' to keep such rows"))
    return df.where(F.when(F.col(ERROR_COLUMN).isNotNull(), F.raise_error(message))
                    .otherwise(F.lit(True)))


def _decode_arrow(batches: Iterator[pa.RecordBatch], fields: StructType, keep: list[str]
                  ) -> Iterator[pa.RecordBatch]:
    """Decode each body as an Arrow IPC stream (in a Python worker)."""
    import pyarrow as pa
    from pyspark.sql.pandas.types import to_arrow_schema

    target = to_arrow_schema(fields, timezone="UTC")
    nulls = pa.table({f.name: pa.nulls(1, f.type) for f in target}, schema=target)
    for batch in batches:
        rows: list[int] = []
        parts: list[pa.Table] = []
        errors: list[str | None] = []
        for i, body in enumerate(batch.column("body").to_pylist()):
            try:
                table = _conform(pa.ipc.open_stream(body).read_all(), target)
                error = None
            except (pa.ArrowException, KeyError, TypeError, ValueError) as exc:
                table, error = nulls, f"not an Arrow stream of the schema ({exc})"
            rows += [i] * table.num_rows
            errors += [error] * table.num_rows
            parts.append(table)
        indices = pa.array(rows, pa.int64())
        kept = [batch.column(c).take(indices) for c in keep]
        decoded = (pa.concat_tables(parts) if parts else target.empty_table()).combine_chunks()
        columns = [*kept, *[decoded.column(i).combine_chunks() for i in range(len(target))],
                   pa.array(errors, pa.string())]
        yield pa.RecordBatch.from_arrays(columns, names=[*keep, *target.names, ERROR_COLUMN])


def _conform(table: pa.Table, target: pa.Schema) -> pa.Table:
    """Return ``table``'s columns of ``target``, by name, cast to its types.

    Raises:
        KeyError: a column is missing; pyarrow.ArrowInvalid: one does not cast.
    """
    import pyarrow as pa

    missing = [f.name for f in target if f.name not in table.column_names]
    if missing:
        raise KeyError(f"no column {', '.join(missing)}")
    columns = [table.column(f.name).cast(f.type) for f in target]
    return pa.Table.from_arrays(columns, schema=target)
