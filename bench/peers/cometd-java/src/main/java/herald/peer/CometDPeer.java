package herald.peer;

import java.util.List;

import org.cometd.bayeux.server.BayeuxServer;
import org.cometd.server.BayeuxServerImpl;
import org.cometd.server.http.jakarta.CometDServlet;
import org.eclipse.jetty.ee10.servlet.ServletContextHandler;
import org.eclipse.jetty.ee10.servlet.ServletHolder;
import org.eclipse.jetty.server.Server;
import org.eclipse.jetty.server.ServerConnector;
import org.eclipse.jetty.util.thread.QueuedThreadPool;
import org.eclipse.jetty.websocket.server.WebSocketUpgradeHandler;

/**
 * CometD's own Java server (BayeuxServerImpl, CometD 8 on Jetty 12) at
 * {@code /cometd} with the websocket and long-polling transports, as a
 * peer for {@code herald bench cometd} (seed 001).
 *
 * <p>Usage: {@code java -cp 'target/classes:target/lib/*' herald.peer.CometDPeer PORT [HOST]}.
 * Prints {@code listening HOST:PORT} once it accepts connections.
 *
 * <p>Everything is CometD's default except what a benchmark needs to say:
 * the transports offered, the held /meta/connect's timeout (30 s, CometD's
 * default, written out), the websocket idle timeout above it (60 s; Jetty's
 * default, 30 s, races the held connect), {@code maxSessionsPerBrowser = -1} and
 * {@code trustClientSession = true}, because the bench's long-polling clients
 * send no cookies (CometD ties a session to its BAYEUX_BROWSER cookie unless
 * told to trust the clientId alone). No extension,
 * no authorizer: channels are created on subscribe, as CometD does by default.
 */
public final class CometDPeer {
    private CometDPeer() {}

    public static void main(String[] args) throws Exception {
        int port = args.length > 0 ? Integer.parseInt(args[0]) : 8090;
        String host = args.length > 1 ? args[1] : "127.0.0.1";

        QueuedThreadPool threads = new QueuedThreadPool(256);
        threads.setName("cometd");
        Server server = new Server(threads);
        ServerConnector connector = new ServerConnector(server);
        connector.setHost(host);
        connector.setPort(port);
        connector.setAcceptQueueSize(4096);
        // Longer than a held /meta/connect, as CometD's docs advise.
        connector.setIdleTimeout(60_000);
        server.addConnector(connector);

        ServletContextHandler context = new ServletContextHandler("/");
        server.setHandler(context);
        // Jetty's core websocket upgrade, in front of the servlets: CometD's
        // JettyWebSocketTransport registers its mapping on this container.
        WebSocketUpgradeHandler upgrade = WebSocketUpgradeHandler.from(server, context);
        context.insertHandler(upgrade);

        BayeuxServerImpl bayeux = new BayeuxServerImpl();
        bayeux.setOption(BayeuxServerImpl.TRANSPORTS_OPTION, String.join(",", List.of(
                "org.cometd.server.websocket.jetty.JettyWebSocketTransport",
                "org.cometd.server.http.JSONHttpTransport")));
        bayeux.setOption("cometdURLMapping", "/cometd/*");
        bayeux.setOption("timeout", "30000");
        // Jetty's websocket idle timeout defaults to 30 s, the same as the
        // held connect: left so, it races the connect's answer and closes
        // idle clients with 1001 "Connection Idle Timeout". CometD's docs
        // ask for an idle timeout above timeout + interval; 60 s, as the
        // connector's.
        bayeux.setOption("ws.idleTimeout", "60000");
        bayeux.setOption("maxSessionsPerBrowser", "-1");
        // The bench's long-polling client sends no cookies; CometD would
        // otherwise tie each session to its BAYEUX_BROWSER cookie and answer
        // 402 session_unknown without it.
        bayeux.setOption("trustClientSession", "true");
        bayeux.setOption(org.eclipse.jetty.server.Context.class.getName(), context.getContext());
        context.setAttribute(BayeuxServer.ATTRIBUTE, bayeux);

        ServletHolder cometd = new ServletHolder(CometDServlet.class);
        cometd.setAsyncSupported(true);
        cometd.setInitOrder(1);
        context.addServlet(cometd, "/cometd/*");

        server.start();
        System.out.println("listening " + host + ":" + connector.getLocalPort()
                + " transports " + bayeux.getAllowedTransports());
        System.out.flush();
        server.join();
    }
}
