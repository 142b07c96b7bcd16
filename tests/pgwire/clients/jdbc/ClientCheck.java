// pgjdbc against a refimpl server: each check prints "OK <name>" or "FAIL <name>: <why>".
// Run by tests/pgwire/clients/test_jdbc.py as a single-file source launch:
//   java -cp /usr/share/java/postgresql.jar ClientCheck.java HOST PORT DATABASE USER PASSWORD
import java.io.StringReader;
import java.io.StringWriter;
import java.sql.Connection;
import java.sql.DatabaseMetaData;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.Savepoint;
import java.sql.Statement;
import java.sql.Types;
import java.time.OffsetDateTime;
import java.time.ZoneOffset;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import org.postgresql.PGConnection;
import org.postgresql.copy.CopyManager;

public class ClientCheck {
    interface Check {
        void run(Connection conn) throws Exception;
    }

    static void expect(boolean ok, String what) {
        if (!ok) {
            throw new AssertionError(what);
        }
    }

    static void check(Connection conn, String name, Check body) {
        try {
            body.run(conn);
            System.out.println("OK " + name);
        } catch (Throwable e) {
            String why = String.valueOf(e).replace('\n', ' ');
            System.out.println("FAIL " + name + ": " + why);
        }
    }

    public static void main(String[] args) throws Exception {
        String url = "jdbc:postgresql://" + args[0] + ":" + args[1] + "/" + args[2];
        Properties props = new Properties();
        props.setProperty("user", args[3]);
        props.setProperty("password", args[4]);
        props.setProperty("sslmode", "disable");
        props.setProperty("prepareThreshold", "2"); // server-prepared after two runs
        try (Connection conn = DriverManager.getConnection(url, props)) {
            System.out.println("OK connect");
            check(conn, "create", c -> {
                try (Statement s = c.createStatement()) {
                    s.execute("CREATE TABLE t (id INT PRIMARY KEY, big BIGINT, x DOUBLE,"
                        + " name STRING, ok BOOLEAN, at TIMESTAMP)");
                }
            });
            OffsetDateTime at = OffsetDateTime.of(2026, 9, 24, 10, 0, 0, 250_000_000, ZoneOffset.UTC);
            check(conn, "prepared-every-type", c -> {
                try (PreparedStatement p = c.prepareStatement("INSERT INTO t VALUES (?, ?, ?, ?, ?, ?)")) {
                    for (int n = 1; n <= 5; n++) { // past prepareThreshold: binary and named
                        p.setInt(1, n);
                        p.setLong(2, 1L << 40);
                        p.setDouble(3, 1.5);
                        p.setString(4, "é'x " + n);
                        p.setBoolean(5, true);
                        p.setObject(6, at);
                        expect(p.executeUpdate() == 1, "one row inserted");
                    }
                    p.setInt(1, 6);
                    p.setNull(2, Types.BIGINT);
                    p.setNull(3, Types.DOUBLE);
                    p.setNull(4, Types.VARCHAR);
                    p.setNull(5, Types.BOOLEAN);
                    p.setNull(6, Types.TIMESTAMP_WITH_TIMEZONE);
                    expect(p.executeUpdate() == 1, "a row of NULLs inserted");
                }
                try (PreparedStatement q = c.prepareStatement("SELECT * FROM t WHERE id = ?")) {
                    for (int n = 1; n <= 5; n++) {
                        q.setInt(1, n);
                        try (ResultSet r = q.executeQuery()) {
                            expect(r.next(), "a row");
                            expect(r.getLong("big") == 1L << 40, "big");
                            expect(r.getDouble("x") == 1.5, "x");
                            expect(r.getString("name").equals("é'x " + n), "name " + r.getString("name"));
                            expect(r.getBoolean("ok"), "ok");
                            expect(r.getObject("at", OffsetDateTime.class).isEqual(at), "at " + r.getString("at"));
                            expect(!r.next(), "one row");
                        }
                    }
                    q.setInt(1, 6);
                    try (ResultSet r = q.executeQuery()) {
                        expect(r.next(), "the NULL row");
                        r.getLong("big");
                        expect(r.wasNull(), "big is NULL");
                        expect(r.getString("name") == null, "name is NULL");
                    }
                }
            });
            check(conn, "batch", c -> {
                try (PreparedStatement p = c.prepareStatement("INSERT INTO t (id, name) VALUES (?, ?)")) {
                    for (int n = 100; n < 200; n++) {
                        p.setInt(1, n);
                        p.setString(2, "batch " + n);
                        p.addBatch();
                    }
                    int[] counts = p.executeBatch();
                    expect(counts.length == 100, "100 counts");
                }
                try (Statement s = c.createStatement(); ResultSet r = s.executeQuery(
                        "SELECT count(*) FROM t WHERE id >= 100")) {
                    r.next();
                    expect(r.getLong(1) == 100, "100 rows");
                }
            });
            check(conn, "transaction", c -> {
                c.setAutoCommit(false);
                try (Statement s = c.createStatement()) {
                    s.executeUpdate("INSERT INTO t (id) VALUES (300)");
                    c.rollback();
                    s.executeUpdate("INSERT INTO t (id) VALUES (301)");
                    c.commit();
                } finally {
                    c.setAutoCommit(true);
                }
                try (Statement s = c.createStatement(); ResultSet r = s.executeQuery(
                        "SELECT count(*) FROM t WHERE id IN (300, 301)")) {
                    r.next();
                    expect(r.getLong(1) == 1, "only the committed row");
                }
            });
            check(conn, "savepoint", c -> {
                c.setAutoCommit(false);
                try (Statement s = c.createStatement()) {
                    s.executeUpdate("INSERT INTO t (id) VALUES (400)");
                    Savepoint sp = c.setSavepoint();
                    s.executeUpdate("INSERT INTO t (id) VALUES (401)");
                    c.rollback(sp);
                    c.commit();
                } finally {
                    c.setAutoCommit(true);
                }
                try (Statement s = c.createStatement(); ResultSet r = s.executeQuery(
                        "SELECT count(*) FROM t WHERE id IN (400, 401)")) {
                    r.next();
                    expect(r.getLong(1) == 1, "the row before the savepoint only");
                }
            });
            check(conn, "copy-in-out", c -> {
                CopyManager copy = c.unwrap(PGConnection.class).getCopyAPI();
                long in = copy.copyIn("COPY t (id, name) FROM STDIN (FORMAT csv)",
                    new StringReader("500,copied\n501,\"with, comma\"\n"));
                expect(in == 2, "2 rows in");
                StringWriter out = new StringWriter();
                long outRows = copy.copyOut("COPY (SELECT id, name FROM t WHERE id >= 500 ORDER BY id)"
                    + " TO STDOUT (FORMAT csv)", out);
                expect(outRows == 2, "2 rows out");
                expect(out.toString().equals("500,copied\n501,\"with, comma\"\n"), out.toString());
            });
            check(conn, "metadata-tables", c -> {
                DatabaseMetaData meta = c.getMetaData();
                List<String> names = new ArrayList<>();
                try (ResultSet r = meta.getTables(null, "public", "%", new String[] {"TABLE"})) {
                    while (r.next()) {
                        names.add(r.getString("TABLE_NAME"));
                    }
                }
                expect(names.contains("t"), "tables " + names);
            });
            check(conn, "metadata-columns", c -> {
                List<String> columns = new ArrayList<>();
                try (ResultSet r = c.getMetaData().getColumns(null, "public", "t", "%")) {
                    while (r.next()) {
                        columns.add(r.getString("COLUMN_NAME") + ":" + r.getString("TYPE_NAME"));
                    }
                }
                expect(columns.toString().equals(
                    "[id:int4, big:int8, x:float8, name:text, ok:bool, at:timestamptz]"), "columns " + columns);
            });
            check(conn, "metadata-primary-keys", c -> {
                List<String> keys = new ArrayList<>();
                try (ResultSet r = c.getMetaData().getPrimaryKeys(null, "public", "t")) {
                    while (r.next()) {
                        keys.add(r.getString("COLUMN_NAME") + ":" + r.getString("PK_NAME"));
                    }
                }
                expect(keys.toString().equals("[id:t_pkey]"), "keys " + keys);
            });
            check(conn, "metadata-index-info", c -> {
                List<String> indexes = new ArrayList<>();
                try (ResultSet r = c.getMetaData().getIndexInfo(null, "public", "t", false, true)) {
                    while (r.next()) {
                        indexes.add(r.getString("INDEX_NAME") + ":" + r.getString("COLUMN_NAME")
                            + ":" + r.getBoolean("NON_UNIQUE") + ":" + r.getShort("ORDINAL_POSITION"));
                    }
                }
                expect(indexes.toString().equals("[t_pkey:id:false:1]"), "indexes " + indexes);
            });
            check(conn, "error-sqlstate", c -> {
                try (Statement s = c.createStatement()) {
                    s.executeQuery("SELECT * FROM nowhere");
                    throw new AssertionError("no error");
                } catch (java.sql.SQLException e) {
                    expect("42P01".equals(e.getSQLState()), "SQLSTATE " + e.getSQLState());
                }
            });
        }
    }
}
