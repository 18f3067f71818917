"""The permission that makes a platform admin moved from gpu_requests
(`review_quotarequest`) to teams (`review_requests`; teams 0002, gpu_requests
0011): whoever held the old one, directly or through a group, still reviews
after the migration, and holds the old one again after its reverse."""

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission

from teams import access
from tests.migrating import migrate_back, migrate_forward

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

BEFORE = [("gpu_requests", "0010_flavor_moved_to_cluster"), ("teams", "0001_initial")]
OLD = {"content_type__app_label": "gpu_requests", "codename": "review_quotarequest"}


def grant_before_the_move(old):
    """alice holds the old permission herself, bob through the reviewers group,
    carol nothing."""
    review = old.get_model("auth", "Permission").objects.get(**OLD)
    User = old.get_model("auth", "User")
    reviewers = old.get_model("auth", "Group").objects.create(name="reviewers")
    reviewers.permissions.add(review)
    User.objects.create(username="alice").user_permissions.add(review)
    User.objects.create(username="bob").groups.add(reviewers)
    User.objects.create(username="carol")


@pytest.mark.django_db(transaction=True)
def test_reviewers_still_review_after_the_move_and_hold_the_old_permission_after_its_reverse():
    try:
        old = migrate_back(BEFORE, state=BEFORE)
        grant_before_the_move(old)

        migrate_forward()
        users = get_user_model().objects.order_by("username")
        assert [user.username for user in users if access.can_review(user)] == ["alice", "bob"]
        assert not Permission.objects.filter(**OLD).exists()
        assert list(access.review_permission().group_set.values_list("name", flat=True)) == [
            "reviewers"
        ]

        old = migrate_back(BEFORE, state=BEFORE)
        review = old.get_model("auth", "Permission").objects.get(**OLD)
        assert sorted(review.user_set.values_list("username", flat=True)) == ["alice"]
        assert list(review.group_set.values_list("name", flat=True)) == ["reviewers"]
        assert (
            not old.get_model("auth", "Permission")
            .objects.filter(content_type__app_label="teams", codename="review_requests")
            .exists()
        )
    finally:
        migrate_forward()
