// node's pg-logical-replication with its pgoutput plugin, unmodified, against the server.
// Usage: node stream.js <host> <port> <user> <password> <database> <slot> <publication> <n>
// Makes the slot, subscribes, prints one JSON line a message ({lsn, tag, row}), and ends
// after n messages.
const { Client } = require("pg");
const { LogicalReplicationService, PgoutputPlugin } = require("pg-logical-replication");

async function main() {
  const [host, port, user, password, database, slot, publication, wanted] = process.argv.slice(2);
  const config = { host, port: Number(port), user, password, database };
  const maker = new Client({ ...config, replication: "database" });
  await maker.connect();
  await maker.query(`CREATE_REPLICATION_SLOT "${slot}" LOGICAL pgoutput`);
  await maker.end();
  console.log(JSON.stringify({ ready: true }));
  const service = new LogicalReplicationService(config, {
    acknowledge: { auto: true, timeoutSeconds: 1 },
  });
  const plugin = new PgoutputPlugin({ protoVersion: 1, publicationNames: [publication] });
  let seen = 0;
  service.on("data", async (lsn, message) => {
    console.log(JSON.stringify({ lsn, tag: message.tag, row: message.new || null }));
    seen += 1;
    if (seen >= Number(wanted)) {
      await service.acknowledge(lsn);
      await service.stop();
      process.exit(0);
    }
  });
  service.on("error", (error) => {
    console.error(String(error));
    process.exit(2);
  });
  await service.subscribe(plugin, slot);
}

main().catch((error) => {
  console.error(String(error));
  process.exit(1);
});
