// CometD's own Java client against Herald's Bayeux endpoint (issue 27),
// long-polling: handshake with Herald's JWT in ext.herald.token, a wildcard
// subscription, a publication from this client received back through the
// wildcard and through an exact subscription, a publication to a channel
// the namespace rules refuse (answered unsuccessful, nothing delivered),
// and a disconnect. Exits 0 when every step held, 1 with the reason
// otherwise. Usage: BayeuxJavaClient URL TOKEN
import java.util.Map;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import org.cometd.bayeux.Message;
import org.cometd.client.BayeuxClient;
import org.cometd.client.http.jetty.JettyHttpClientTransport;
import org.eclipse.jetty.client.HttpClient;

public final class BayeuxJavaClient {
    private static final long WAIT_MS = 5_000;

    private static void check(boolean ok, String what) {
        if (!ok) {
            System.err.println("bayeux-java: FAILED: " + what);
            System.exit(1);
        }
        System.out.println("bayeux-java: ok: " + what);
    }

    private static Message reply(CompletableFuture<Message> f, String what) throws Exception {
        Message m = f.get(WAIT_MS, TimeUnit.MILLISECONDS);
        check(m != null, what + " answered");
        return m;
    }

    public static void main(String[] args) throws Exception {
        String url = args[0];
        String token = args[1];
        HttpClient http = new HttpClient();
        http.start();
        BayeuxClient client = new BayeuxClient(url, new JettyHttpClientTransport(null, http));
        try {
            client.handshake(Map.of("ext", Map.of("herald", Map.of("token", token))));
            check(client.waitFor(WAIT_MS, BayeuxClient.State.CONNECTED), "handshake and connect");

            BlockingQueue<Message> wild = new LinkedBlockingQueue<>();
            BlockingQueue<Message> exact = new LinkedBlockingQueue<>();
            CompletableFuture<Message> s1 = new CompletableFuture<>();
            CompletableFuture<Message> s2 = new CompletableFuture<>();
            client.getChannel("/java/*").subscribe((ch, m) -> wild.add(m), s1::complete);
            client.getChannel("/java/room").subscribe((ch, m) -> exact.add(m), s2::complete);
            check(reply(s1, "wildcard subscribe").isSuccessful(), "subscribe /java/*");
            check(reply(s2, "exact subscribe").isSuccessful(), "subscribe /java/room");

            CompletableFuture<Message> p = new CompletableFuture<>();
            client.getChannel("/java/room").publish(Map.of("text", "from java", "n", 7), p::complete);
            check(reply(p, "publish").isSuccessful(), "publish /java/room");
            Message a = wild.poll(WAIT_MS, TimeUnit.MILLISECONDS);
            Message b = exact.poll(WAIT_MS, TimeUnit.MILLISECONDS);
            check(a != null && "/java/room".equals(a.getChannel()), "delivery through /java/*: " + a);
            check(b != null && "from java".equals(b.getDataAsMap().get("text")), "delivery through /java/room: " + b);
            check(((Number) b.getDataAsMap().get("n")).intValue() == 7, "data kept: " + b);

            // The test's namespace rule: nobody publishes under locked~.
            CompletableFuture<Message> refused = new CompletableFuture<>();
            client.getChannel("/locked~x").publish(Map.of("x", 1), refused::complete);
            Message r = reply(refused, "refused publish");
            check(!r.isSuccessful(), "a publish the namespace rules refuse is unsuccessful: " + r);
            check(wild.poll(300, TimeUnit.MILLISECONDS) == null, "nothing else delivered");

            client.disconnect();
            check(client.waitFor(WAIT_MS, BayeuxClient.State.DISCONNECTED), "disconnect");
        } finally {
            http.stop();
        }
        System.exit(0);
    }
}
