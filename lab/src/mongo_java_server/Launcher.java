// Starts mongo-java-server (in-memory backend) on 127.0.0.1:<port> for the mongo-social test
// fixture, and runs until killed.
//
// mongo-java-server 1.47.0 names itself MongoDB 5.0 but reports wire version 8, below the 9 that
// the Rust driver 3.x requires. Nothing in the server is gated on the number, so this reports
// 5.0 with wire version 13, which is what MongoDB 5.0 reports.
//
// The oplog is on, so change streams work (as on a MongoDB replica set).

import de.bwaldvogel.mongo.MongoServer;
import de.bwaldvogel.mongo.MongoVersion;
import de.bwaldvogel.mongo.backend.memory.MemoryBackend;
import java.net.InetSocketAddress;
import java.util.List;

public final class Launcher {
    private enum Version implements MongoVersion {
        MONGO_5_0_WIRE_13;

        @Override
        public List<Integer> getVersionArray() {
            return List.of(5, 0, 0);
        }

        @Override
        public int getWireVersion() {
            return 13;
        }
    }

    public static void main(String[] args) throws InterruptedException {
        if (args.length != 1) {
            System.err.println("usage: Launcher <port>");
            System.exit(2);
        }
        int port = Integer.parseInt(args[0]);
        MongoServer server = new MongoServer(new MemoryBackend().version(Version.MONGO_5_0_WIRE_13));
        server.enableOplog();
        server.bind(new InetSocketAddress("127.0.0.1", port));
        Runtime.getRuntime().addShutdownHook(new Thread(server::shutdownNow));
        Thread.currentThread().join();
    }
}
