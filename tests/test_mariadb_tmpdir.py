"""Each MariaDB the project starts keeps its temporary files in a directory of its own
(``stack.servers.mariadb_tmpdir``). A MariaDB that starts, and its installer, delete
every ``#sql*`` file in their tmpdir: in a shared /tmp those are the internal
temporary tables of the servers running beside them, taken from under their queries
("Error on delete of '/tmp/#sql-temptable-…'", or a crash in ``ha_maria::drop_table``)."""

import tempfile
import uuid
from pathlib import Path

import pytest

from stack.drill import scratch_mariadb

pytestmark = pytest.mark.server  # it starts a MariaDB of its own


def test_a_new_mariadb_leaves_the_temporary_tables_in_the_shared_tmp_alone():
    another = Path(tempfile.gettempdir()) / f"#sql-temptable-{uuid.uuid4().hex[:8]}-1-1.MAD"
    another.touch()  # what a running server's query holds
    try:
        with scratch_mariadb() as server:  # installed, started, asked, stopped
            server.connect().close()
        assert another.exists()
    finally:
        another.unlink(missing_ok=True)
