import pytest

from teams.namespaces import namespace_of


def test_it_puts_the_configured_prefix_before_the_slug(settings):
    settings.PORTAL_NAMESPACE_PREFIX = "gpu-"
    assert namespace_of("vision") == "gpu-vision"
    assert namespace_of("vision", prefix="team-") == "team-vision"


def test_it_refuses_a_namespace_name_over_63_characters():
    assert namespace_of("a" * 58, prefix="team-") == "team-" + "a" * 58
    with pytest.raises(ValueError, match="longer than 63"):
        namespace_of("a" * 59, prefix="team-")
