"""Every verb's ``--help`` renders, states true defaults and names only devices tvmrt runs.

The devices tvmrt ships backends for are read from the runtime's own answer for a device
it lacks (``get_device_api`` lists them), so the help is checked against the backend table,
not against a list kept here.
"""

from __future__ import annotations

import argparse
import re

import pytest

from tvmrt.cli import build_parser, main
from tvmrt.error import DeviceUnavailableError
from tvmrt.runtime.device import Device, get_device_api
from tvmrt.runtime.device_type import MASK2STR, STR2MASK


def _verb_parsers() -> dict[str, argparse.ArgumentParser]:
    """`run`, `bench`, ..., and `rpc server` / `rpc tracker`: every parser a user reaches."""
    found: dict[str, argparse.ArgumentParser] = {}

    def walk(prefix: str, parser: argparse.ArgumentParser) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    found[f"{prefix} {name}".strip()] = sub
                    walk(f"{prefix} {name}".strip(), sub)

    walk("", build_parser())
    return found


VERBS = _verb_parsers()


def _shipped_device_types() -> set[int]:
    # Vulkan: a device type tvmrt has no backend for, so the refusal lists the shipped ones
    vulkan = next(mask for mask, name in MASK2STR.items() if name == "vulkan")
    with pytest.raises(DeviceUnavailableError) as info:
        get_device_api(Device(vulkan, 0))
    shipped = re.search(r"ships backends for ([^)]*)\)", str(info.value))
    assert shipped, str(info.value)
    return {STR2MASK[name.strip()] for name in shipped.group(1).split(",")}


def test_every_verb_is_covered():
    expected = {"run", "bench", "profile", "inspect", "serve", "rpc server", "rpc tracker"}
    assert expected | {"config"} <= set(VERBS), sorted(VERBS)


@pytest.mark.parametrize("verb", sorted(VERBS))
def test_help_renders_and_exits_0(verb, capsys):
    with pytest.raises(SystemExit) as done:
        main([*verb.split(), "--help"])
    assert done.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: tvmrt {verb}"), out[:200]
    if verb != "rpc":  # the group's help lists its commands; each command has options
        assert "options:" in out


@pytest.mark.parametrize("verb", sorted(VERBS))
def test_help_names_no_device_without_a_backend(verb):
    shipped = _shipped_device_types()
    assert 1 in shipped  # the CPU
    absent = {name for name, mask in STR2MASK.items() if mask not in shipped} | {"gpu"}
    text = VERBS[verb].format_help().lower()
    named = {name for name in absent if re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", text)}
    assert not named, f"tvmrt {verb} --help names {sorted(named)}, which tvmrt cannot run"


def _stated_default(help_text: str) -> str | None:
    """The value a help string gives in its closing parentheses: '(10)', '(default: x)'."""
    found = re.search(r"\(([^()]*)\)\s*$", help_text)
    if not found:
        return None
    return re.sub(r"^default:?\s*", "", found.group(1)).strip()


def _spellings(value: object) -> set[str]:
    if isinstance(value, float):
        return {f"{value:g}", str(value)}
    return {str(value)}


@pytest.mark.parametrize("verb", sorted(VERBS))
def test_defaults_in_help_are_the_parsers_defaults(verb):
    checked = 0
    for action in VERBS[verb]._actions:
        if not action.help or action.default in (None, argparse.SUPPRESS, False, []):
            continue
        stated = _stated_default(action.help)
        if stated is None:
            continue
        assert stated in _spellings(action.default), (
            f"tvmrt {verb} {action.option_strings}: help says {stated!r}, "
            f"default is {action.default!r}"
        )
        checked += 1
    if verb in {"run", "bench", "profile", "serve", "rpc server", "rpc tracker"}:
        assert checked >= 2, f"tvmrt {verb}: no default stated in its help"


def test_every_endpoint_serve_answers_is_in_its_help():
    text = VERBS["serve"].format_help()
    for endpoint in ("/v2/health", "/ready", "/stats", "/config", "/metrics", "/infer"):
        assert endpoint in text, endpoint
