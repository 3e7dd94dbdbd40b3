"""Samples shared by the tests of rtlab.measure.loads and rtlab.measure.window: what a Linux
6.1 board prints in /proc, and where a virtual board's network load sends its traffic."""

from rtlab.measure.loads import HostTraffic

# /proc/stat of a 4-CPU board (Linux 6.1, USER_HZ 100), read 5 s apart with CPUs 0 and 1
# busy (stress-ng) and CPUs 2 and 3 isolated and idle
STAT_BEFORE = """\
cpu  6160 0 2450 22340 40 0 60 0 0 0
cpu0 3012 0 1200 5000 20 0 40 0 0 0
cpu1 2980 0 1150 5100 10 0 12 0 0 0
cpu2 48 0 40 6120 6 0 6 0 0 0
cpu3 120 0 60 6120 4 0 2 0 0 0
intr 120233 0 0 0 0 0 0 0 0 0 0 0 0 4301 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0
ctxt 401236
btime 1735689600
processes 1290
procs_running 3
procs_blocked 0
softirq 80431 2 30120 5 402 0 0 1301 28420 0 20181
"""

STAT_AFTER = """\
cpu  6845 0 2755 23340 40 0 62 0 0 0
cpu0 3352 0 1349 5010 20 0 41 0 0 0
cpu1 3320 0 1299 5110 10 0 13 0 0 0
cpu2 51 0 42 6615 6 0 6 0 0 0
cpu3 122 0 65 6605 4 0 2 0 0 0
intr 121502 0 0 0 0 0 0 0 0 0 0 0 0 4412 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0
ctxt 409978
btime 1735689600
processes 1302
procs_running 4
procs_blocked 0
softirq 81502 2 30611 5 410 0 0 1322 28846 0 20306
"""

TRAFFIC = HostTraffic(ping_address="10.0.2.2", stream_host="127.0.0.1", stream_port=15001,
                      board_port=5001)

ICMP_HEADER_6_1 = (
    "Icmp: InMsgs InErrors InCsumErrors InDestUnreachs InTimeExcds InParmProbs InSrcQuenchs "
    "InRedirects InEchos InEchoReps InTimestamps InTimestampReps InAddrMasks InAddrMaskReps "
    "OutMsgs OutErrors OutDestUnreachs OutTimeExcds OutParmProbs OutSrcQuenchs OutRedirects "
    "OutEchos OutEchoReps OutTimestamps OutTimestampReps OutAddrMasks OutAddrMaskReps")

TCP_HEADER = ("Tcp: RtoAlgorithm RtoMin RtoMax MaxConn ActiveOpens PassiveOpens AttemptFails "
              "EstabResets CurrEstab InSegs OutSegs RetransSegs InErrs OutRsts InCsumErrors")
