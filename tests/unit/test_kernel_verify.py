"""The check behind `rtlab kernel config`, on small synthetic fragments, .config text and
Kconfig trees: what counts as requested, what counts as landed, and what Kconfig says about
a dropped option."""

import textwrap
from pathlib import Path

import pytest

from rtlab.kernel.config import (
    KernelConfigError,
    Request,
    holds,
    merge_requests,
    parse_fragment,
    read_config,
    verify,
)
from rtlab.kernel.kconfig_scan import KconfigIndex, annotate, evaluate


def fragment(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def test_parse_fragment(tmp_path):
    path = fragment(tmp_path, "a.config", """\
        # a comment about CONFIG_PREEMPT_RT (mentioning an option is fine)

        CONFIG_PREEMPT_RT=y
        # CONFIG_CPU_IDLE is not set
        CONFIG_CMDLINE="console=ttyS0"
        CONFIG_HZ=1000
        CONFIG_X=n
        """)
    assert [(r.option, r.value, r.line) for r in parse_fragment(path)] == [
        ("CONFIG_PREEMPT_RT", "y", 3), ("CONFIG_CPU_IDLE", "n", 4),
        ("CONFIG_CMDLINE", '"console=ttyS0"', 5), ("CONFIG_HZ", "1000", 6),
        ("CONFIG_X", "n", 7)]


@pytest.mark.parametrize(("text", "line", "words"), [
    ("CONFIG_A=y\nCONFIG_B y\n", 2, ["'CONFIG_B y' is not a config line"]),
    ("CONFIG_A=\n", 1, ["no value"]),
    ("CONFIG_A= y\n", 1, ["spaces"]),
    ("# CONFIG_A=y\n", 1, ["comments must not start with '# CONFIG_'"]),
    ("#CONFIG_A is not set\n", 1, ["not a config line"]),
    ("PREEMPT_RT=y\n", 1, ["not a config line"]),
    ("CONFIG_A=y\n\n# CONFIG_A is not set\n", 3, ["CONFIG_A is already set on line 1"]),
])
def test_bad_fragment_lines(tmp_path, text, line, words):
    path = fragment(tmp_path, "bad.config", text)
    with pytest.raises(KernelConfigError) as caught:
        parse_fragment(path)
    assert str(caught.value).startswith(f"{path}:{line}: ")
    for word in words:
        assert word in str(caught.value)


def test_later_fragment_overrides(tmp_path):
    first = fragment(tmp_path, "1.config", "CONFIG_A=y\nCONFIG_B=y\n")
    second = fragment(tmp_path, "2.config", "# CONFIG_A is not set\nCONFIG_C=m\n")
    merged = merge_requests([first, second])
    assert list(merged) == ["CONFIG_A", "CONFIG_B", "CONFIG_C"]
    assert (merged["CONFIG_A"].value, merged["CONFIG_A"].fragment,
            merged["CONFIG_A"].line) == ("n", second, 1)


def test_what_counts_as_landed():
    values = read_config("CONFIG_A=y\n# CONFIG_B is not set\nCONFIG_S=\"x\"\n")
    assert values == {"CONFIG_A": "y", "CONFIG_B": "n", "CONFIG_S": '"x"'}
    p = Path("f.config")
    assert holds(Request("CONFIG_A", "y", p, 1), values)
    assert not holds(Request("CONFIG_A", "m", p, 1), values)
    assert holds(Request("CONFIG_B", "n", p, 1), values)
    # not in the .config at all: invisible, hence off
    assert holds(Request("CONFIG_GONE", "n", p, 1), values)
    assert not holds(Request("CONFIG_GONE", "y", p, 1), values)
    assert holds(Request("CONFIG_S", '"x"', p, 1), values)


@pytest.mark.parametrize(("expr", "value"), [
    ("A", 2), ("B", 0), ("M", 1), ("!A", 0), ("A && M", 1), ("B || M", 1),
    ("A && !(B || C)", 2), ("HZ = 100", 2), ("HZ != 100", 0), ("HZ > 99", 2),
    ('S = "x"', 2), ("A=y", 2), ("$(cc-option,-foo)", None), ("A &&", None),
])
def test_evaluate(expr, value):
    values = {"A": "y", "B": "n", "M": "m", "HZ": "100", "S": "x"}
    assert evaluate(expr, values) == value


def test_annotate():
    assert annotate("EXPERT && (ARCH_SUPPORTS_RT || !X) && HZ >= 100",
                    {"EXPERT": "n", "ARCH_SUPPORTS_RT": "y", "HZ": "250"}) == (
        "EXPERT [=n] && (ARCH_SUPPORTS_RT [=y] || !X [=n]) && HZ [=250] >= 100")


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "linux"
    (root / "arch" / "arm").mkdir(parents=True)
    (root / "arch" / "arm64").mkdir(parents=True)
    (root / "kernel").mkdir()
    (root / "Kconfig").write_text(textwrap.dedent("""\
        mainmenu "Linux"
        source "arch/$(SRCARCH)/Kconfig"
        source "kernel/Kconfig.preempt"

        config EXPERT
        \tbool "Configure standard kernel features (expert users)"

        menu "Power"
        \tdepends on PM

        config CPU_IDLE
        \tbool "CPU idle PM support"
        \thelp
        \t  depends on NOTHING_REAL: help text is not a dependency.

        endmenu

        config ACPI_PROCESSOR
        \ttristate "Processor"
        \tselect ACPI_PROCESSOR_IDLE

        config ACPI_PROCESSOR_IDLE
        \tbool
        \tselect CPU_IDLE

        if FOO
        config FOO_DRIVER
        \tbool "Foo driver" if EXPERT
        endif

        config ONLY_SELECTED
        \tbool
        """))
    (root / "arch" / "arm" / "Kconfig").write_text(
        "config ARM\n\tdef_bool y\n\tselect ARCH_SUPPORTS_RT if HAVE_TASK_WORK\n")
    (root / "arch" / "arm64" / "Kconfig").write_text(
        "config ARM64\n\tdef_bool y\n\tselect ARCH_SUPPORTS_RT\n\nconfig ARM64_ONLY\n"
        "\tbool \"arm64 only\"\n")
    (root / "kernel" / "Kconfig.preempt").write_text(textwrap.dedent("""\
        config ARCH_SUPPORTS_RT
        \tbool

        config PREEMPT_RT
        \tbool "Fully Preemptible Kernel (Real-Time)"
        \tdepends on EXPERT && ARCH_SUPPORTS_RT
        \tselect PREEMPTION
        """))
    return root


def explain(tree: Path, arch: str, symbol: str, requested: str,
            values: dict[str, str]) -> list[str]:
    return KconfigIndex(tree, arch).explain(symbol, requested, values)


def test_explains_unmet_depends_on(tree):
    assert explain(tree, "arm", "PREEMPT_RT", "y", {"ARM": "y"}) == [
        "kernel/Kconfig.preempt:6: depends on EXPERT [=n] && ARCH_SUPPORTS_RT [=n]"]


def test_explains_enclosing_blocks_and_prompt_conditions(tree):
    (reason,) = explain(tree, "arm", "CPU_IDLE", "y", {})
    assert reason == ("Kconfig:9: menu depends on PM [=n] (in the block for CPU_IDLE at "
                      "Kconfig:11)")
    reasons = explain(tree, "arm", "FOO_DRIVER", "y", {"FOO": "n", "EXPERT": "n"})
    assert reasons == ["Kconfig:26: if FOO [=n] (in the block for FOO_DRIVER at Kconfig:27)",
                       "Kconfig:28: prompt if EXPERT [=n]"]


def test_explains_select_only_symbols(tree):
    assert explain(tree, "arm", "ONLY_SELECTED", "y", {}) == [
        "Kconfig:31: has no prompt: only set by `select` (nothing selects it)"]
    (reason,) = explain(tree, "arm64", "ARCH_SUPPORTS_RT", "n",
                        {"ARM64": "y", "ARCH_SUPPORTS_RT": "y"})
    assert reason == "arch/arm64/Kconfig:3: selected by ARM64 [=y]"


def test_explains_what_keeps_an_option_on(tree):
    values = {"CPU_IDLE": "y", "ACPI_PROCESSOR_IDLE": "y", "ACPI_PROCESSOR": "y"}
    assert explain(tree, "arm64", "CPU_IDLE", "n", values) == [
        "Kconfig:24: selected by ACPI_PROCESSOR_IDLE [=y] (no prompt), which is "
        "Kconfig:20: selected by ACPI_PROCESSOR [=y]"]


def test_other_architectures_symbols_are_unknown(tree):
    (reason,) = explain(tree, "arm", "ARM64_ONLY", "y", {})
    assert "no 'config ARM64_ONLY' in this tree's Kconfig for ARCH=arm" in reason
    assert explain(tree, "arm64", "ARM64_ONLY", "y", {})[0].endswith("Kconfig names no "
        "reason (a range, a type mismatch or a string value written differently?)")


def test_verify_reports_each_dropped_option(tree, tmp_path):
    path = fragment(tmp_path, "rt.config", """\
        CONFIG_EXPERT=y
        CONFIG_PREEMPT_RT=y
        # CONFIG_CPU_IDLE is not set
        # CONFIG_GONE is not set
        """)
    config = "CONFIG_EXPERT=y\nCONFIG_ARM=y\n# CONFIG_PREEMPT_RT is not set\nCONFIG_CPU_IDLE=y\n"
    index = KconfigIndex(tree, "arm")
    dropped = verify(parse_fragment(path), config, index.explain)
    assert [(d.option, d.requested, d.actual, d.line) for d in dropped] == [
        ("CONFIG_PREEMPT_RT", "y", "n", 2), ("CONFIG_CPU_IDLE", "n", "y", 3)]
    text = dropped[0].describe()
    assert text.startswith(f"{path}:2: CONFIG_PREEMPT_RT=y requested, final .config has "
                           "# CONFIG_PREEMPT_RT is not set")
    assert "kernel/Kconfig.preempt:6: depends on EXPERT [=y] && ARCH_SUPPORTS_RT [=n]" in text
