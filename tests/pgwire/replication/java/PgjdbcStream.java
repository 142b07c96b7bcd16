// pgjdbc's replication API, as Debezium's PostgreSQL connector drives it: a pgoutput slot,
// a stream with proto_version and publication_names, flushed positions confirmed.
// Usage: PgjdbcStream <jdbc url> <user> <password> <slot> <publication> <messages to read>
// Prints one line a message: its position, its type, and for an Insert its first value.
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.DriverManager;
import java.util.Properties;
import java.util.concurrent.TimeUnit;
import org.postgresql.PGConnection;
import org.postgresql.PGProperty;
import org.postgresql.replication.PGReplicationStream;

public class PgjdbcStream {
    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        PGProperty.USER.set(props, args[1]);
        PGProperty.PASSWORD.set(props, args[2]);
        PGProperty.ASSUME_MIN_SERVER_VERSION.set(props, "10");
        PGProperty.REPLICATION.set(props, "database");
        PGProperty.PREFER_QUERY_MODE.set(props, "simple");
        try (Connection connection = DriverManager.getConnection(args[0], props)) {
            PGConnection replication = connection.unwrap(PGConnection.class);
            replication.getReplicationAPI().createReplicationSlot().logical()
                .withSlotName(args[3]).withOutputPlugin("pgoutput").make();
            System.out.println("slot made");
            System.out.flush();
            PGReplicationStream stream = replication.getReplicationAPI().replicationStream()
                .logical().withSlotName(args[3])
                .withSlotOption("proto_version", 1)
                .withSlotOption("publication_names", args[4])
                .withStatusInterval(1, TimeUnit.SECONDS)
                .start();
            int wanted = Integer.parseInt(args[5]);
            for (int n = 0; n < wanted; n++) {
                ByteBuffer buffer = stream.read();
                int start = buffer.position();
                char type = (char) buffer.get(start);
                String line = stream.getLastReceiveLSN().asString() + " " + type;
                if (type == 'I') {
                    // I, relation OID (4), N, column count (2), t, length (4), the text
                    int length = buffer.getInt(start + 9);
                    byte[] text = new byte[length];
                    for (int i = 0; i < length; i++) {
                        text[i] = buffer.get(start + 13 + i);
                    }
                    line += " " + new String(text, StandardCharsets.UTF_8);
                }
                System.out.println(line);
                System.out.flush();
                stream.setFlushedLSN(stream.getLastReceiveLSN());
                stream.setAppliedLSN(stream.getLastReceiveLSN());
            }
            stream.forceUpdateStatus();
            stream.close();
        }
    }
}
