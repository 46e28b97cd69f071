"""Stage 5b: the privacy certificate — model, JSON Schema, verification and explanation."""

from dpspec.certificate.model import SCHEMA_VERSION, Certificate, json_schema, json_schema_text

__all__ = ["SCHEMA_VERSION", "Certificate", "json_schema", "json_schema_text"]
