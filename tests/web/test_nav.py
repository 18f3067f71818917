"""The top bar: reviewers get links to their own pages, members do not."""

from django.urls import reverse

CLUSTER_LINK = '<a href="/cluster/">Cluster</a>'


def test_it_links_reviewers_to_the_cluster(login, admin_user):
    page = login(admin_user).get(reverse("dashboard")).content.decode()
    assert CLUSTER_LINK in page


def test_it_marks_the_cluster_link_current_on_the_cluster_page(login, admin_user):
    page = login(admin_user).get(reverse("cluster_overview")).content.decode()
    assert '<a href="/cluster/" aria-current="page">Cluster</a>' in page


def test_it_hides_the_cluster_from_members(login, alice, charlie):
    for user in (alice, charlie):
        page = login(user).get(reverse("dashboard")).content.decode()
        assert "/cluster/" not in page
