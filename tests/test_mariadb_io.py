"""The MariaDB the tests run on writes data and log through the page cache
(``stack.servers.INNODB_IO``): the I/O under which ``benchmarks.mariadb_crash`` found
a SIGKILLed server coming back whole, which the chaos faults count on."""

import pytest
from django.db import connection


@pytest.mark.django_db
def test_the_stacks_mariadb_writes_data_and_log_through_the_page_cache():
    with connection.cursor() as cursor:
        cursor.execute("SELECT @@GLOBAL.innodb_flush_method")
        assert cursor.fetchone() == ("fsync",)
        cursor.execute("SHOW GLOBAL VARIABLES LIKE 'innodb_log_file_buffering'")
        found = cursor.fetchone()
    assert found is None or found[1] == "ON", found  # older servers have no such setting
