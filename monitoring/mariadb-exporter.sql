-- docker-compose's MariaDB, on its first start: the user the exporter reads the
-- server's status as, nothing of the data. The database is reachable only inside
-- the compose network, where the exporter runs.
CREATE USER IF NOT EXISTS 'exporter'@'%' IDENTIFIED BY 'exporter' WITH MAX_USER_CONNECTIONS 3;
GRANT PROCESS ON *.* TO 'exporter'@'%';
