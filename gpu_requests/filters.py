"""Finding requests: one set of filters for the request list page and the API.

The filters are a GET form, so a filtered list is an address that can be
bookmarked and shared; the page and `GET /api/v1/quota-requests/` read the
same parameters through `RequestFilter`, and a bad value is a form error on
the page and a 400 naming the parameter in the API.
"""

from datetime import UTC, datetime, time, timedelta

from django import forms
from django.contrib.contenttypes.models import ContentType
from django.db.models import CharField, Exists, F, OuterRef, Q
from django.db.models.functions import Cast

from gpu_requests.models import QuotaRequest
from teams.models import AuditEvent

Status = QuotaRequest.Status

# ?sort= value -> ordering (the newest-first index serves the default).
SORTS = {
    "-created": ("-created_at", "-pk"),
    "created": ("created_at", "pk"),
    "starts": ("starts_at", "pk"),
    "-starts": ("-starts_at", "-pk"),
    "gpus": ("gpus", "pk"),
    "-gpus": ("-gpus", "-pk"),
    "cost": (F("estimated_cost").asc(nulls_last=True), "pk"),
    "-cost": (F("estimated_cost").desc(nulls_last=True), "-pk"),
    "team": ("team__name", "-created_at", "-pk"),
    "-team": ("-team__name", "-created_at", "-pk"),
    "status": ("status", "-created_at", "-pk"),
    "-status": ("-status", "-created_at", "-pk"),
}
SORT_LABELS = {
    "-created": "Newest first",
    "created": "Oldest first",
    "starts": "Start, earliest first",
    "-starts": "Start, latest first",
    "gpus": "GPUs, fewest first",
    "-gpus": "GPUs, most first",
    "cost": "Cost, lowest first",
    "-cost": "Cost, highest first",
    "team": "Team, A to Z",
    "-team": "Team, Z to A",
    "status": "Status, A to Z",
    "-status": "Status, Z to A",
}
PARAMETERS = {
    "team": "Only this team's requests (slug).",
    "flavor": "Only this flavor (slug).",
    "status": "Only requests in this status.",
    "requester": "Only requests made by this user (user name).",
    "period_from": "Only requests whose period meets this day or later (YYYY-MM-DD, UTC).",
    "period_to": "Only requests whose period meets this day or earlier (YYYY-MM-DD, UTC).",
    "q": "Words in the justification or in a decision's reason (case-insensitive).",
    "sort": "Order: " + ", ".join(SORTS) + " (a leading '-' reverses).",
}


class NoNulCharField(forms.CharField):
    """A query string may hold anything; PostgreSQL text may not hold NUL."""

    def validate(self, value):
        super().validate(value)
        if "\x00" in value:
            raise forms.ValidationError("Contains a NUL character.")


class RequestFilter(forms.Form):
    q = NoNulCharField(label="Search", required=False, max_length=200)
    team = NoNulCharField(label="Team", required=False, max_length=63)
    flavor = NoNulCharField(label="Flavor", required=False, max_length=50)
    status = forms.ChoiceField(
        label="Status", required=False, choices=[("", "Any status"), *Status.choices]
    )
    requester = NoNulCharField(label="Requested by", required=False, max_length=150)
    period_from = forms.DateField(
        label="Period from", required=False, widget=forms.DateInput(attrs={"type": "date"})
    )
    period_to = forms.DateField(
        label="Period to", required=False, widget=forms.DateInput(attrs={"type": "date"})
    )
    sort = forms.ChoiceField(label="Sort", required=False, choices=list(SORT_LABELS.items()))

    def __init__(self, params, *, teams=(), flavors=(), strict=False):
        """`strict` (the API): a parameter given empty is an error, as the schema says;
        the page's form sends its empty fields, which mean "any"."""
        super().__init__({name: params.get(name) for name in self.base_fields if name in params})
        self.strict = strict
        if teams:
            self.fields["team"].widget = forms.Select(choices=[("", "All teams"), *teams])
        if flavors:
            self.fields["flavor"].widget = forms.Select(choices=[("", "All flavors"), *flavors])

    def clean(self):
        cleaned = super().clean()
        if self.strict:
            # The schema's enums and dates have no empty value; an empty text is no filter.
            typed = ("status", "sort", "period_from", "period_to")
            for name, value in self.data.items():
                if name in typed and not str(value).strip() and name not in self.errors:
                    self.add_error(name, "Give a value, or leave the parameter out.")
        # A period that ends before it starts meets no request: an empty list, not an error.
        return cleaned

    def apply(self, requests):
        """`requests` narrowed and ordered as asked (the form must be valid)."""
        data = self.cleaned_data
        if data["team"]:
            requests = requests.filter(team__slug=data["team"])
        if data["flavor"]:
            requests = requests.filter(flavor__slug=data["flavor"])
        if data["status"]:
            requests = requests.filter(status=data["status"])
        if data["requester"]:
            requests = requests.filter(requested_by__username=data["requester"])
        if data["period_from"] and data["period_to"] and data["period_to"] < data["period_from"]:
            return requests.none()
        if data["period_from"] or data["period_to"]:
            starts_at = _midnight(data["period_from"]) if data["period_from"] else None
            ends_at = (
                _midnight(data["period_to"]) + timedelta(days=1) if data["period_to"] else None
            )
            requests = requests.overlapping(starts_at or datetime.min.replace(tzinfo=UTC), ends_at)
        if data["q"]:
            # The request's id as text, as its events hold it: their subject index serves.
            reasons = AuditEvent.objects.filter(
                subject_type=ContentType.objects.get_for_model(QuotaRequest),
                subject_id=Cast(OuterRef("pk"), CharField()),
                reason__icontains=data["q"],
            )
            requests = requests.filter(Q(justification__icontains=data["q"]) | Exists(reasons))
        return requests.order_by(*SORTS[data["sort"] or "-created"])

    def is_filtered(self):
        return any(self.cleaned_data.get(name) for name in self.fields if name != "sort")


def _midnight(day):
    return datetime.combine(day, time.min, tzinfo=UTC)
