"""A power loss at every fsync of the workload: a restart shows exactly what was acknowledged.

The workload of `disk_faults.STEPS` runs once on a `PowerLossFiles`, which keeps what each
file held at its last fsync and which names each folder held at its last fsync. Before every
fsync (of a file or a folder) it writes a copy of what a power loss at that moment would leave:
writes not yet fsync'd are gone, and so are files created, renamed or removed since their
folder's last fsync. Each copy is then opened as a restart would: it must open (a torn tail is
cut back, never damage), and it must show every change acknowledged before the moment, none of
a step not begun, and the step running at that moment either made or not made.
"""

from __future__ import annotations

from tests.engine.disk_faults import check_power_loss_at_every_fsync


def test_a_power_loss_at_every_fsync_recovers_what_was_acknowledged(tmp_path):
    check_power_loss_at_every_fsync(tmp_path)
