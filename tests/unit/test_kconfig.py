"""rtlab.artifacts.kconfig: options of a kernel .config, its preemption model, and the
pattern of the options that are grepped on the board."""

import subprocess

import pytest

from rtlab.artifacts.kconfig import RELEVANT, options, preemption_model

# excerpt of a 6.1 armhf .config (stock kernel): comments, unset options, strings, numbers
STD_CONFIG = """\
#
# Automatically generated file; DO NOT EDIT.
# Linux/arm 6.1.176 Kernel Configuration
#
CONFIG_CC_VERSION_TEXT="arm-linux-gnueabihf-gcc-12 (Debian 12.2.0-14) 12.2.0"
CONFIG_CC_IS_GCC=y
CONFIG_GCC_VERSION=120200
CONFIG_LOCALVERSION=""
# CONFIG_LOCALVERSION_AUTO is not set

#
# Timers subsystem
#
CONFIG_TICK_ONESHOT=y
CONFIG_NO_HZ_COMMON=y
# CONFIG_HZ_PERIODIC is not set
CONFIG_NO_HZ_IDLE=y
# CONFIG_NO_HZ_FULL is not set
CONFIG_NO_HZ=y
CONFIG_HIGH_RES_TIMERS=y
# end of Timers subsystem

CONFIG_PREEMPT_VOLUNTARY_BUILD=y
# CONFIG_PREEMPT_NONE is not set
CONFIG_PREEMPT_VOLUNTARY=y
# CONFIG_PREEMPT is not set
# CONFIG_PREEMPT_RT is not set
CONFIG_CGROUP_SCHED=y
CONFIG_FAIR_GROUP_SCHED=y
# CONFIG_RT_GROUP_SCHED is not set
CONFIG_HZ_FIXED=0
# CONFIG_HZ_100 is not set
CONFIG_HZ_250=y
# CONFIG_HZ_1000 is not set
CONFIG_HZ=250
CONFIG_CPU_FREQ=y
CONFIG_CPU_FREQ_STAT=y
CONFIG_CPU_FREQ_DEFAULT_GOV_ONDEMAND=y
CONFIG_CPU_FREQ_GOV_PERFORMANCE=m
CONFIG_CPU_IDLE=y
CONFIG_CPU_IDLE_GOV_MENU=y
CONFIG_ARM_CPUIDLE=y
CONFIG_INIT_ON_ALLOC_DEFAULT_ON=y
# CONFIG_INIT_ON_FREE_DEFAULT_ON is not set
CONFIG_IRQ_FORCED_THREADING=y
CONFIG_PREEMPT_NOTIFIERS=y
CONFIG_MODULES=y
"""

# the options of STD_CONFIG that RELEVANT selects
STD_RELEVANT = {
    "CONFIG_NO_HZ_COMMON": "y", "CONFIG_NO_HZ_IDLE": "y", "CONFIG_NO_HZ": "y",
    "CONFIG_HIGH_RES_TIMERS": "y", "CONFIG_PREEMPT_VOLUNTARY_BUILD": "y",
    "CONFIG_PREEMPT_VOLUNTARY": "y", "CONFIG_HZ_FIXED": "0", "CONFIG_HZ_250": "y",
    "CONFIG_HZ": "250", "CONFIG_CPU_FREQ": "y", "CONFIG_CPU_FREQ_STAT": "y",
    "CONFIG_CPU_FREQ_DEFAULT_GOV_ONDEMAND": "y", "CONFIG_CPU_FREQ_GOV_PERFORMANCE": "m",
    "CONFIG_CPU_IDLE": "y", "CONFIG_CPU_IDLE_GOV_MENU": "y",
    "CONFIG_INIT_ON_ALLOC_DEFAULT_ON": "y", "CONFIG_IRQ_FORCED_THREADING": "y",
    "CONFIG_PREEMPT_NOTIFIERS": "y",
}


def test_options_keep_set_options_only():
    found = options(STD_CONFIG)
    assert found["CONFIG_CC_VERSION_TEXT"] == (
        '"arm-linux-gnueabihf-gcc-12 (Debian 12.2.0-14) 12.2.0"')
    assert found["CONFIG_LOCALVERSION"] == '""'
    assert found["CONFIG_HZ"] == "250" and found["CONFIG_CPU_FREQ_GOV_PERFORMANCE"] == "m"
    # "is not set" lines are not options
    assert "CONFIG_PREEMPT" not in found and "CONFIG_RT_GROUP_SCHED" not in found
    assert len(found) == sum(1 for line in STD_CONFIG.splitlines()
                             if line.startswith("CONFIG_"))


def test_options_ignore_what_is_not_an_option():
    text = "  CONFIG_HZ=100 \nHZ=250\nCONFIG_NOVALUE\n# CONFIG_A=y\n\nCONFIG_B=\n"
    assert options(text) == {"CONFIG_HZ": "100", "CONFIG_B": ""}


@pytest.mark.parametrize(("lines", "model"), [
    # PREEMPT_RT in the 6.1 choice
    (["# CONFIG_PREEMPT_NONE is not set", "# CONFIG_PREEMPT_VOLUNTARY is not set",
      "# CONFIG_PREEMPT is not set", "CONFIG_PREEMPT_RT=y", "CONFIG_PREEMPT_COUNT=y",
      "CONFIG_PREEMPTION=y", "CONFIG_PREEMPT_RCU=y"], "PREEMPT_RT"),
    # since 6.12 PREEMPT_RT is an option beside the choice
    (["CONFIG_PREEMPT_BUILD=y", "CONFIG_PREEMPT=y", "CONFIG_PREEMPT_RT=y"], "PREEMPT_RT"),
    (["CONFIG_PREEMPT_BUILD=y", "# CONFIG_PREEMPT_NONE is not set", "CONFIG_PREEMPT=y",
      "CONFIG_PREEMPT_COUNT=y", "CONFIG_PREEMPTION=y"], "PREEMPT"),
    # a dynamic kernel is built for full preemption and boots with the chosen default
    (["CONFIG_PREEMPT_BUILD=y", "CONFIG_PREEMPT_VOLUNTARY=y", "# CONFIG_PREEMPT is not set",
      "CONFIG_PREEMPT_DYNAMIC=y", "CONFIG_PREEMPTION=y"], "VOLUNTARY"),
    (["CONFIG_PREEMPT_NONE_BUILD=y", "CONFIG_PREEMPT_NONE=y",
      "# CONFIG_PREEMPT_VOLUNTARY is not set"], "NONE"),
    # a fragment without the choice, or none of it set
    (["CONFIG_HZ=250", "CONFIG_PREEMPT_NOTIFIERS=y"], None),
    (["# CONFIG_PREEMPT is not set", "# CONFIG_PREEMPT_RT is not set"], None),
    (["CONFIG_PREEMPT_BUILD=y"], None),
    (["CONFIG_PREEMPT=n"], None),
    ([], None),
])
def test_preemption_model(lines, model):
    assert preemption_model("\n".join(lines)) == model


def test_preemption_model_of_a_whole_config():
    assert preemption_model(STD_CONFIG) == "VOLUNTARY"


@pytest.mark.parametrize("name", sorted(STD_RELEVANT))
def test_relevant_options(name):
    assert RELEVANT.match(f"{name}=y")


@pytest.mark.parametrize("line", [
    "CONFIG_MODULES=y", "CONFIG_TICK_ONESHOT=y", "CONFIG_ARM_CPUIDLE=y",
    "# CONFIG_PREEMPT is not set", "CONFIG_HIGH_RES_TIMERS_EXTRA=y", "CONFIG_RT_GROUP_SCHED",
    " CONFIG_HZ=250", "CONFIG_INIT_ON_=y",
])
def test_irrelevant_lines(line):
    assert not RELEVANT.match(line)


def test_the_board_greps_the_same_options_as_the_pattern_selects(tmp_path):
    """The pattern is plain ERE: grep -E on the board selects what Python's re does."""
    assert "'" not in RELEVANT.pattern  # it is single-quoted in the board's command
    config = tmp_path / "config"
    config.write_text(STD_CONFIG, encoding="utf-8")
    done = subprocess.run(["grep", "-E", RELEVANT.pattern, str(config)], capture_output=True,
                          text=True, check=True)
    assert done.stdout.splitlines() == [line for line in STD_CONFIG.splitlines()
                                        if RELEVANT.match(line)]
    assert options(done.stdout) == STD_RELEVANT
