"""Names are one line (issue 17): they go into email subjects and notice titles,
where a line break raised BadHeaderError. Refused where they are typed."""

import pytest
from django.core import mail
from django.core.exceptions import ValidationError

from accounts import actions as token_actions
from batch import validation
from teams import actions as team_actions
from teams import emails

BAD = ["a\r\nBcc: all@example.com", "a\nb", "tab\there", "nul\x00", "esc\x1b[31m"]


@pytest.mark.parametrize("name", BAD)
def test_a_team_name_with_control_characters_is_refused(admin_user, name):
    with pytest.raises(ValidationError) as refused:
        team_actions.create_team(name=name, slug="newteam", by=admin_user)
    assert "one line" in str(refused.value)


@pytest.mark.parametrize("name", BAD)
def test_a_token_name_with_control_characters_is_refused(alice, name):
    with pytest.raises(token_actions.TokenError):
        token_actions.create_token(alice, name=name, days=30)


@pytest.mark.parametrize("name", BAD)
def test_job_and_window_names_with_control_characters_are_refused(name):
    assert validation.name_errors(name)
    assert validation.name_errors("train-resnet ünïcode · fine") == []


def test_a_subject_with_a_line_break_is_sent_on_one_line(db):
    assert emails.send("batch_jobs", "a\r\nBcc: x@example.com", ["a@example.com"], {"items": []})
    assert mail.outbox[0].subject == "a  Bcc: x@example.com"
    assert not mail.outbox[0].bcc
