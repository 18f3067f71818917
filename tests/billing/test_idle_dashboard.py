"""The team page's idle dashboard: who pays for idle GPUs, at a glance."""

import re

from tests.billing.idle_month import NOW, _clock, month  # noqa: F401 (fixtures)

URL = "/billing/teams/vision/?month=2026-11"


def _rows(page):
    """The picture's row labels, top to bottom."""
    block = page[page.index('id="idle-picture"') : page.index("</ol>", page.index("heat-rows"))]
    return re.findall(r'<a href="[^"]+"[^>]*>([^<]+)</a>', block)


def test_rows_are_sorted_by_idle_cost_and_name_their_shape(client, alice, month):  # noqa: F811
    client.force_login(alice)
    page = client.get(URL).content.decode()
    # The notebook's idle A100s cost more than any sweep job; the busy trainer is last.
    rows = _rows(page)
    assert rows == ["Pod notebook", "18 jobs sweep-0 … sweep-17", "Job train"]
    assert "2 × A100 80GB" in page and "4 × H100 80GB" in page
    assert "<strong>665.00 USD idle</strong>" in page  # 266 idle A100-hours at 2.50
    assert "(88 % of 304 GPU-hours held)" in page


def test_idle_is_drawn_apart_from_not_running_with_exact_values(client, alice, month):  # noqa: F811
    client.force_login(alice)
    page = client.get(URL).content.decode()
    notebook = page[page.index("Pod notebook") : page.index("</li>", page.index("Pod notebook"))]
    # Busy from 09:00 (40 %), idle from 10:00 to 17:00, nothing drawn overnight.
    assert "01 Nov 09:00–01 Nov 10:00: 2 GPUs, 40 % active, 0 of 2 GPU-hours idle" in notebook
    assert "01 Nov 10:00–01 Nov 17:00: 2 GPUs, 1 % active, 14 of 14 GPU-hours idle" in notebook
    assert notebook.count('class="band-idle"') == 19 and notebook.count('class="band-mid"') == 19
    # The same figures without the picture.
    assert "The picture as a table" in page
    assert "<td>idle, 1.0 %</td>" in page


def test_repeats_are_grouped_in_top_idle_workloads(client, alice, month):  # noqa: F811
    client.force_login(alice)
    page = client.get(URL).content.decode()
    top = page[page.index('id="top-idle"') : page.index('id="by-flavor"')]
    assert (
        "<strong>18 jobs</strong> sweep-0 … sweep-17, same shape (1 × H100 80GB): "
        "<strong>216.00 USD idle</strong>" in top
    )
    # Every flavor and kind: the notebook first, the group next.
    assert top.index("Pod notebook") < top.index("18 jobs") < top.index("Job train")


def test_the_workloads_csv_keeps_every_workload(client, alice, month):  # noqa: F811
    client.force_login(alice)
    response = client.get(URL + "&export=workloads")
    assert response.content.decode().count("sweep-") == 18
