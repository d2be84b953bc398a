"""Every registered protocol is in the contract suite, and its profile is well formed."""

from __future__ import annotations

import pytest

from contract.profiles import PROFILES, Variant, variant_id, variants
from ticdc_spark.codec import get_codec, make_decoder, make_encoder, protocols
from ticdc_spark.codec.base import Decoder, Encoder


def test_every_registered_protocol_has_a_profile() -> None:
    missing = [name for name in protocols() if name not in PROFILES]
    assert not missing, (
        f"protocols {missing} are registered but have no contract profile: add one to "
        "tests/contract/profiles.py (option sets, what they carry, golden files)"
    )


def test_every_profile_names_a_registered_protocol() -> None:
    assert sorted(PROFILES) == sorted(set(PROFILES) & set(protocols()))
    for profile in PROFILES.values():
        assert profile.variants, f"{profile.name}: a profile needs at least one option set"
        labels = [v.label for v in profile.variants]
        assert len(set(labels)) == len(labels)


@pytest.mark.parametrize(("protocol", "variant"), variants(), ids=variant_id)
def test_option_sets_build_codecs(protocol: str, variant: Variant) -> None:
    spec = get_codec(protocol)
    assert spec.name == protocol
    assert isinstance(spec.parse_options(variant.options), spec.options)
    encoder = make_encoder(protocol, variant.options)
    decoder = make_decoder(protocol, variant.options)
    assert isinstance(encoder, Encoder) and isinstance(decoder, Decoder)
    assert encoder.protocol == decoder.protocol == protocol
