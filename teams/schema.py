"""The OpenAPI schema's errors: the ones any operation can answer, each
`{"detail": ...}`, documented on every operation that does not document its own."""

from drf_spectacular import openapi
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse

from teams.inputs import HIDDEN_RANGES, validate_visible
from teams.serializers import ErrorSerializer

ERROR_DESCRIPTIONS = {
    "400": 'Invalid input: `{"field": ["message", ...]}`, or `{"detail": "..."}`.',
    "401": "No credentials, or a token that does not exist.",
    "403": "You may not do this.",
    "404": "Nothing here, or it belongs to a team you are not in.",
    "413": "The body is larger than the server takes.",
    "415": "The body is not JSON.",
    "429": "Too many requests; try again after `Retry-After` seconds.",
}


# A 400 names the fields (`{"limit": [...]}`) or, for a body that is not
# JSON, has a `detail`: any object.
ERRORS = {
    code: OpenApiResponse(
        OpenApiTypes.OBJECT if code == "400" else ErrorSerializer, description=description
    )
    for code, description in ERROR_DESCRIPTIONS.items()
}

# What an operation documents as its own answers, in every app's API.
ERROR_400 = ERRORS["400"]
ERROR_403 = OpenApiResponse(ErrorSerializer, description="You may see this but not do this.")
ERROR_404 = OpenApiResponse(ErrorSerializer, description="No such request among your teams'.")
ERROR_409 = OpenApiResponse(
    ErrorSerializer, description="The request's status does not allow this (e.g. not pending)."
)


# What the edge refuses (portal/edge.py) and PostgreSQL cannot store, said in the
# schema: a text value holds no NUL character.
NO_NUL = r"^[^\x00]*$"


def no_nul_characters(result, generator, request, public):
    """Every free text in the schema (a string with no format, enum or pattern of its
    own) gets the NUL ban as its pattern (a drf-spectacular postprocessing hook)."""

    def visit(node):
        if isinstance(node, dict):
            if node.get("type") == "string" and not node.keys() & {"format", "enum", "pattern"}:
                node["pattern"] = NO_NUL
            for value in node.values():
                visit(value)
        elif isinstance(node, list):
            for value in node:
                visit(value)

    visit(result)
    return result


# A text that refuses invisible format characters (inputs.validate_visible), and
# NUL as every text does: its pattern. The BMP's alone: JSON Schema tools (Rust's
# and Python's regex engines behind schemathesis among them) cannot agree on a
# character beyond it in a pattern; the validator refuses those too (tag
# characters U+E0020-U+E007F, ...).
_HIDDEN_CLASS = "".join(
    f"\\u{low:04x}" if low == high else f"\\u{low:04x}-\\u{high:04x}"
    for low, high in HIDDEN_RANGES
    if high <= 0xFFFF
)
VISIBLE_TEXT = f"^[^\\u0000{_HIDDEN_CLASS}]*$"


class AutoSchema(openapi.AutoSchema):
    """drf-spectacular's, plus the errors any operation can answer (each
    `{"detail": ...}`) unless the view documents its own, and the pattern of a
    text that refuses invisible characters."""

    def _insert_field_validators(self, field, schema):
        super()._insert_field_validators(field, schema)
        if validate_visible in field.validators and schema.get("type") == "string":
            schema["pattern"] = VISIBLE_TEXT

    def _get_response_bodies(self, direction="response"):
        responses = super()._get_response_bodies(direction)
        if direction != "response":
            return responses
        codes = ["400", "401", "403", "429"]
        if "{" in self.path:
            codes.append("404")
        if self.method in ("POST", "PUT", "PATCH"):
            codes += ["413", "415"]
        for code in codes:
            if code not in responses:
                responses[code] = self._get_response_for_code(ERRORS[code], code)
        return responses
