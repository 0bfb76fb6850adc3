import com.alibaba.fastjson.JSON;
import com.alibaba.fastjson.serializer.SerializerFeature;
import java.io.BufferedOutputStream;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.PrintStream;
import java.lang.management.ManagementFactory;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.text.SimpleDateFormat;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.Date;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Semaphore;
import java.util.concurrent.SynchronousQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.rocketmq.acl.common.AclClientRPCHook;
import org.apache.rocketmq.acl.common.SessionCredentials;
import org.apache.rocketmq.client.consumer.DefaultLitePullConsumer;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.ConsumeOrderlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.consumer.listener.MessageListenerOrderly;
import org.apache.rocketmq.client.consumer.rebalance.AllocateMessageQueueAveragely;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendCallback;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageClientExt;
import org.apache.rocketmq.common.message.MessageClientIDSetter;
import org.apache.rocketmq.common.message.MessageConst;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;
import org.apache.rocketmq.common.protocol.heartbeat.MessageModel;
import org.apache.rocketmq.remoting.RPCHook;

/**
 * Java's own RocketMQ 4.9.8 client, driven from the tests and bench/rocketmq.py
 * (tests/rocketmq/java_peer.py compiles and runs it). One JSON object per stdout line.
 *
 *   RmqPeer MODE --ns 127.0.0.1:9876 --topic T [--option value ...]
 *
 * Modes:
 *   produce   --n N [--sizes 100,5000] [--tags a,b] [--key-prefix k] [--keys-per-message 1]
 *             [--props k=v;k2=v2] [--run-id R] [--queue broker-a:0] [--group G]
 *             one "sent" line per message (sent one at a time, synchronously)
 *   consume   --group G --n N [--expression *] [--timeout-ms 60000] [--consume-from first|last|
 *             timestamp:MILLIS] [--broadcasting true] [--orderly true] [--fail-times K]
 *             [--linger-ms 0]: push consumer; one "received" line per delivery; stops once N
 *             distinct messages succeeded (then lingers) or at the timeout, or on SIGTERM
 *             (shut down cleanly: offsets committed)
 *   pull      --n N [--start broker-a:0:OFFSET,...] [--end broker-a:0:OFFSET,...]
 *             [--timeout-ms 60000] [--group G]: DefaultLitePullConsumer assigned every queue
 *             of the topic, from --start (default: each queue's first offset) to --end
 *   bench-send-sync | bench-send-async | bench-send-batch | bench-consume | bench-latency
 *             --n N [--warmup W] [--size 128] [--in-flight 64] [--batch 256] [--group G]:
 *             one "result" line
 * Every mode: [--access-key A --secret-key S] (AclClientRPCHook); TLS is -Dtls.enable=true.
 * Messages carry body(runId, i, size): the bytes of "runId:i:" repeated up to size bytes.
 * The last line is {"event": "done", ...}; a failure exits 1 with its stack trace on stderr.
 */
public class RmqPeer {
    static PrintStream out;
    static final Map<String, String> opts = new HashMap<>();

    public static void main(String[] args) throws Exception {
        out = new PrintStream(new BufferedOutputStream(new FileOutputStream(FileDescriptor.out), 1 << 16),
            false, "UTF-8");
        System.setOut(System.err);  // whatever the client prints stays off the JSON lines
        Thread flusher = new Thread(() -> {
            while (true) {
                try { Thread.sleep(100); } catch (InterruptedException e) { return; }
                synchronized (out) { out.flush(); }
            }
        });
        flusher.setDaemon(true);
        flusher.start();
        if (args.length < 1) throw new IllegalArgumentException("usage: RmqPeer MODE --key value ...");
        for (int i = 1; i + 1 < args.length; i += 2) {
            if (!args[i].startsWith("--")) throw new IllegalArgumentException("not an option: " + args[i]);
            opts.put(args[i].substring(2), args[i + 1]);
        }
        String mode = args[0];
        try {
            switch (mode) {
                case "produce": produce(); break;
                case "consume": consume(); break;
                case "pull": pull(); break;
                case "bench-send-sync": benchSend("sync"); break;
                case "bench-send-async": benchSend("async"); break;
                case "bench-send-batch": benchSend("batch"); break;
                case "bench-consume": benchConsume(); break;
                case "bench-latency": benchLatency(); break;
                default: throw new IllegalArgumentException("unknown mode " + mode);
            }
        } catch (Throwable e) {
            // the client's threads are not daemons: exit, or the JVM stays
            synchronized (out) { out.flush(); }
            e.printStackTrace();
            System.err.flush();
            System.exit(1);
        }
        synchronized (out) { out.flush(); }
        System.exit(0);
    }

    // ------------------------------------------------------------------ plumbing

    static String opt(String key, String dflt) { return opts.getOrDefault(key, dflt); }

    static String need(String key) {
        String v = opts.get(key);
        if (v == null) throw new IllegalArgumentException("--" + key + " is required");
        return v;
    }

    static int intOpt(String key, int dflt) { return Integer.parseInt(opt(key, String.valueOf(dflt))); }

    static void emit(Map<String, Object> record) {
        String line = JSON.toJSONString(record, SerializerFeature.WriteMapNullValue);
        synchronized (out) {
            out.println(line);
            Object event = record.get("event");
            if (!"sent".equals(event) && !"received".equals(event)) out.flush();
        }
    }

    static Map<String, Object> event(String name) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("event", name);
        return m;
    }

    static RPCHook hook() {
        String ak = opts.get("access-key");
        return ak == null ? null : new AclClientRPCHook(new SessionCredentials(ak, need("secret-key")));
    }

    static DefaultMQProducer producer() throws Exception {
        DefaultMQProducer p = new DefaultMQProducer(opt("producer-group", "rmq_peer_pg"), hook());
        p.setNamesrvAddr(need("ns"));
        p.setSendMsgTimeout(intOpt("send-timeout-ms", 10_000));
        p.start();
        return p;
    }

    static DefaultMQPushConsumer pushConsumer(String group, String consumeFrom) throws Exception {
        DefaultMQPushConsumer c = new DefaultMQPushConsumer(group, hook(), new AllocateMessageQueueAveragely());
        c.setNamesrvAddr(need("ns"));
        if (consumeFrom.equals("first")) {
            c.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        } else if (consumeFrom.equals("last")) {
            c.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET);
        } else if (consumeFrom.startsWith("timestamp:")) {
            c.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_TIMESTAMP);
            long millis = Long.parseLong(consumeFrom.substring("timestamp:".length()));
            c.setConsumeTimestamp(new SimpleDateFormat("yyyyMMddHHmmss").format(new Date(millis)));
        } else {
            throw new IllegalArgumentException("--consume-from first|last|timestamp:MILLIS, not " + consumeFrom);
        }
        if (Boolean.parseBoolean(opt("broadcasting", "false"))) c.setMessageModel(MessageModel.BROADCASTING);
        c.subscribe(need("topic"), opt("expression", "*"));
        return c;
    }

    static byte[] body(String runId, int i, int size) {
        byte[] head = (runId + ":" + i + ":").getBytes(StandardCharsets.UTF_8);
        byte[] b = new byte[size];
        for (int k = 0; k < size; k++) b[k] = head[k % head.length];
        return b;
    }

    static String sha256(byte[] data) throws Exception {
        byte[] d = MessageDigest.getInstance("SHA-256").digest(data);
        StringBuilder sb = new StringBuilder();
        for (byte x : d) sb.append(String.format("%02x", x));
        return sb.toString();
    }

    static Map<String, String> userProperties(Map<String, String> all) {
        Map<String, String> user = new TreeMap<>();
        for (Map.Entry<String, String> e : all.entrySet()) {
            if (!MessageConst.STRING_HASH_SET.contains(e.getKey())) user.put(e.getKey(), e.getValue());
        }
        return user;
    }

    static Map<String, Object> describe(String event, MessageExt m) throws Exception {
        Map<String, Object> r = event(event);
        String uniq = MessageClientIDSetter.getUniqID(m);
        r.put("msg_id", uniq != null ? uniq : m.getMsgId());
        r.put("offset_msg_id", m instanceof MessageClientExt ? ((MessageClientExt) m).getOffsetMsgId() : m.getMsgId());
        r.put("topic", m.getTopic());
        r.put("broker", m.getBrokerName());
        r.put("queue_id", m.getQueueId());
        r.put("queue_offset", m.getQueueOffset());
        r.put("tags", m.getTags());
        r.put("keys", m.getKeys());
        r.put("properties", new TreeMap<>(m.getProperties()));
        r.put("user_properties", userProperties(m.getProperties()));
        r.put("body_sha256", sha256(m.getBody()));
        r.put("body_length", m.getBody().length);
        r.put("reconsume_times", m.getReconsumeTimes());
        r.put("born_timestamp", m.getBornTimestamp());
        r.put("store_timestamp", m.getStoreTimestamp());
        r.put("born_host", m.getBornHostString());
        r.put("store_host", String.valueOf(m.getStoreHost()));
        r.put("sys_flag", m.getSysFlag());
        r.put("commit_log_offset", m.getCommitLogOffset());
        return r;
    }

    static long cpuNanos() {
        return ((com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean())
            .getProcessCpuTime();
    }

    // ------------------------------------------------------------------ produce

    static void produce() throws Exception {
        String topic = need("topic");
        int n = intOpt("n", 1);
        String runId = opt("run-id", Long.toString(System.nanoTime(), 36));
        int[] sizes = Arrays.stream(opt("sizes", "128").split(",")).mapToInt(Integer::parseInt).toArray();
        String[] tags = opt("tags", "").split(",", -1);
        String keyPrefix = opt("key-prefix", "");
        int keysPerMessage = intOpt("keys-per-message", 1);
        Map<String, String> props = new LinkedHashMap<>();
        for (String kv : opt("props", "").split(";")) {
            if (kv.isEmpty()) continue;
            int eq = kv.indexOf('=');
            props.put(kv.substring(0, eq), kv.substring(eq + 1));
        }
        MessageQueue queue = null;
        if (opts.containsKey("queue")) {
            String[] q = need("queue").split(":");
            queue = new MessageQueue(topic, q[0], Integer.parseInt(q[1]));
        }
        DefaultMQProducer p = producer();
        long t0 = System.nanoTime();
        for (int i = 0; i < n; i++) {
            byte[] b = body(runId, i, sizes[i % sizes.length]);
            Message msg = new Message(topic, b);
            String tag = tags[i % tags.length];
            if (!tag.isEmpty()) msg.setTags(tag);
            if (!keyPrefix.isEmpty()) {
                List<String> keys = new ArrayList<>();
                for (int k = 0; k < keysPerMessage; k++) keys.add(keyPrefix + "-" + i + (k == 0 ? "" : "-" + k));
                msg.setKeys(keys);
            }
            for (Map.Entry<String, String> e : props.entrySet()) msg.putUserProperty(e.getKey(), e.getValue());
            SendResult r = queue == null ? p.send(msg) : p.send(msg, queue);
            Map<String, Object> rec = event("sent");
            rec.put("index", i);
            rec.put("status", r.getSendStatus().name());
            rec.put("msg_id", r.getMsgId());
            rec.put("offset_msg_id", r.getOffsetMsgId());
            rec.put("topic", topic);
            rec.put("broker", r.getMessageQueue().getBrokerName());
            rec.put("queue_id", r.getMessageQueue().getQueueId());
            rec.put("queue_offset", r.getQueueOffset());
            rec.put("tags", msg.getTags());
            rec.put("keys", msg.getKeys());
            rec.put("properties", new TreeMap<>(msg.getProperties()));
            rec.put("user_properties", userProperties(msg.getProperties()));
            rec.put("body_sha256", sha256(b));
            rec.put("body_length", b.length);
            emit(rec);
        }
        Map<String, Object> done = event("done");
        done.put("sent", n);
        done.put("run_id", runId);
        done.put("seconds", (System.nanoTime() - t0) / 1e9);
        emit(done);
        p.shutdown();
    }

    // ------------------------------------------------------------------ consume

    static void consume() throws Exception {
        int n = intOpt("n", 1);
        long timeoutMs = Long.parseLong(opt("timeout-ms", "60000"));
        int failTimes = intOpt("fail-times", 0);
        Set<String> done = ConcurrentHashMap.newKeySet();
        AtomicInteger deliveries = new AtomicInteger();
        CountDownLatch all = new CountDownLatch(1);
        DefaultMQPushConsumer c = pushConsumer(need("group"), opt("consume-from", "first"));
        if (Boolean.parseBoolean(opt("orderly", "false"))) {
            c.registerMessageListener((MessageListenerOrderly) (msgs, ctx) -> {
                for (MessageExt m : msgs) {
                    if (!received(m, failTimes, done, deliveries, n, all)) return ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT;
                }
                return ConsumeOrderlyStatus.SUCCESS;
            });
        } else {
            c.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
                for (MessageExt m : msgs) {
                    if (!received(m, failTimes, done, deliveries, n, all)) return ConsumeConcurrentlyStatus.RECONSUME_LATER;
                }
                return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
            });
        }
        long t0 = System.nanoTime();
        c.start();
        // SIGTERM: shut down as an application does (offsets committed, the group told)
        Runtime.getRuntime().addShutdownHook(new Thread(c::shutdown));
        Map<String, Object> started = event("started");
        started.put("client_id", c.getDefaultMQPushConsumerImpl().getmQClientFactory().getClientId());
        emit(started);
        boolean complete = all.await(timeoutMs, TimeUnit.MILLISECONDS);
        Thread.sleep(Long.parseLong(opt("linger-ms", "0")));
        c.shutdown();
        Map<String, Object> end = event("done");
        end.put("received", done.size());
        end.put("deliveries", deliveries.get());
        end.put("timed_out", !complete);
        end.put("seconds", (System.nanoTime() - t0) / 1e9);
        emit(end);
    }

    /** Print one delivery; return whether the listener consumes it (false: --fail-times). */
    static boolean received(MessageExt m, int failTimes, Set<String> done, AtomicInteger deliveries,
                            int n, CountDownLatch all) {
        try {
            boolean ok = m.getReconsumeTimes() >= failTimes;
            Map<String, Object> r = describe("received", m);
            r.put("status", ok ? "CONSUME_SUCCESS" : "RECONSUME_LATER");
            r.put("thread", Thread.currentThread().getName());
            emit(r);
            deliveries.incrementAndGet();
            if (ok && done.add((String) r.get("msg_id")) && done.size() >= n) all.countDown();
            return ok;
        } catch (Exception e) {
            throw new RuntimeException(e);
        }
    }

    // ------------------------------------------------------------------ pull

    static Map<MessageQueue, Long> offsets(String topic, String spec) {
        Map<MessageQueue, Long> m = new HashMap<>();
        if (spec == null || spec.isEmpty()) return m;
        for (String part : spec.split(",")) {
            String[] f = part.split(":");
            m.put(new MessageQueue(topic, f[0], Integer.parseInt(f[1])), Long.parseLong(f[2]));
        }
        return m;
    }

    static void pull() throws Exception {
        String topic = need("topic");
        int n = intOpt("n", Integer.MAX_VALUE);
        long timeoutMs = Long.parseLong(opt("timeout-ms", "60000"));
        Map<MessageQueue, Long> start = offsets(topic, opts.get("start"));
        Map<MessageQueue, Long> end = offsets(topic, opts.get("end"));
        DefaultLitePullConsumer c = new DefaultLitePullConsumer(opt("group", "rmq_peer_pull_" + System.nanoTime()), hook());
        c.setNamesrvAddr(need("ns"));
        c.setAutoCommit(false);
        c.start();
        Collection<MessageQueue> queues = c.fetchMessageQueues(topic);
        c.assign(queues);
        Set<MessageQueue> open = new HashSet<>(queues);
        for (MessageQueue mq : queues) {
            if (start.containsKey(mq)) c.seek(mq, start.get(mq)); else c.seekToBegin(mq);
            if (end.containsKey(mq) && end.get(mq) <= (start.containsKey(mq) ? start.get(mq) : 0L)) {
                open.remove(mq);
                c.pause(Arrays.asList(mq));
            }
        }
        Map<String, Object> started = event("started");
        started.put("queues", queues.size());
        emit(started);
        long t0 = System.nanoTime();
        long deadline = System.currentTimeMillis() + timeoutMs;
        int count = 0;
        while (count < n && !open.isEmpty() && System.currentTimeMillis() < deadline) {
            for (MessageExt m : c.poll(200)) {
                MessageQueue mq = new MessageQueue(topic, m.getBrokerName(), m.getQueueId());
                Long stop = end.get(mq);
                if (stop != null && m.getQueueOffset() >= stop) continue;
                if (count >= n) continue;
                emit(describe("received", m));
                count++;
                if (stop != null && m.getQueueOffset() + 1 >= stop && open.remove(mq)) c.pause(Arrays.asList(mq));
            }
        }
        c.shutdown();
        Map<String, Object> done = event("done");
        done.put("received", count);
        done.put("timed_out", count < n && !open.isEmpty());
        done.put("seconds", (System.nanoTime() - t0) / 1e9);
        emit(done);
    }

    // ------------------------------------------------------------------ benchmarks

    static Message benchMessage(String topic, byte[] b) {
        return new Message(topic, "bench", b);
    }

    static void benchSend(String how) throws Exception {
        String topic = need("topic");
        int n = intOpt("n", 10_000), warmup = intOpt("warmup", n / 10);
        int size = intOpt("size", 128), inFlight = intOpt("in-flight", 64), batch = intOpt("batch", 256);
        DefaultMQProducer p = producer();
        byte[] b = new byte[size];
        Arrays.fill(b, (byte) 'x');
        AtomicLong errors = new AtomicLong();
        sendSome(p, topic, b, warmup, how, inFlight, batch, errors);
        errors.set(0);
        long c0 = cpuNanos(), t0 = System.nanoTime();
        sendSome(p, topic, b, n, how, inFlight, batch, errors);
        long t1 = System.nanoTime(), c1 = cpuNanos();
        p.shutdown();
        Map<String, Object> r = event("result");
        r.put("mode", "bench-send-" + how);
        r.put("messages", n);
        r.put("size", size);
        r.put("seconds", (t1 - t0) / 1e9);
        r.put("rate", n / ((t1 - t0) / 1e9));
        r.put("cpu_seconds", (c1 - c0) / 1e9);
        r.put("errors", errors.get());
        if (how.equals("async")) r.put("in_flight", inFlight);
        if (how.equals("batch")) r.put("batch", batch);
        emit(r);
        emit(event("done"));
    }

    static void sendSome(DefaultMQProducer p, String topic, byte[] b, int n, String how, int inFlight, int batch,
                         AtomicLong errors) throws Exception {
        if (how.equals("sync")) {
            for (int i = 0; i < n; i++) {
                if (p.send(benchMessage(topic, b)).getSendStatus() != org.apache.rocketmq.client.producer.SendStatus.SEND_OK) {
                    errors.incrementAndGet();
                }
            }
        } else if (how.equals("batch")) {
            for (int i = 0; i < n; i += batch) {
                List<Message> msgs = new ArrayList<>();
                for (int k = i; k < Math.min(n, i + batch); k++) msgs.add(benchMessage(topic, b));
                if (p.send(msgs).getSendStatus() != org.apache.rocketmq.client.producer.SendStatus.SEND_OK) {
                    errors.incrementAndGet();
                }
            }
        } else {
            Semaphore window = new Semaphore(inFlight);
            CountDownLatch finished = new CountDownLatch(n);
            for (int i = 0; i < n; i++) {
                window.acquire();
                p.send(benchMessage(topic, b), new SendCallback() {
                    public void onSuccess(SendResult r) { window.release(); finished.countDown(); }
                    public void onException(Throwable e) { errors.incrementAndGet(); window.release(); finished.countDown(); }
                });
            }
            finished.await();
        }
    }

    static void benchConsume() throws Exception {
        int n = intOpt("n", 10_000);
        long timeoutMs = Long.parseLong(opt("timeout-ms", "300000"));
        AtomicInteger count = new AtomicInteger();
        AtomicLong first = new AtomicLong(), last = new AtomicLong();
        CountDownLatch all = new CountDownLatch(1);
        DefaultMQPushConsumer c = pushConsumer(opt("group", "rmq_peer_bench_" + System.nanoTime()), "first");
        c.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            for (MessageExt m : msgs) {
                int k = count.incrementAndGet();
                if (k == 1) first.set(System.nanoTime());
                if (k == n) { last.set(System.nanoTime()); all.countDown(); }
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        long c0 = cpuNanos(), t0 = System.nanoTime();
        c.start();
        boolean complete = all.await(timeoutMs, TimeUnit.MILLISECONDS);
        long c1 = cpuNanos();
        c.shutdown();
        Map<String, Object> r = event("result");
        r.put("mode", "bench-consume");
        r.put("messages", n);
        r.put("received", count.get());
        r.put("complete", complete);
        if (complete) {
            r.put("seconds", (last.get() - first.get()) / 1e9);
            r.put("rate", (n - 1) / ((last.get() - first.get()) / 1e9));
            r.put("seconds_from_start", (last.get() - t0) / 1e9);
            r.put("rate_from_start", n / ((last.get() - t0) / 1e9));
        }
        r.put("cpu_seconds", (c1 - c0) / 1e9);
        emit(r);
        emit(event("done"));
    }

    static void benchLatency() throws Exception {
        String topic = need("topic");
        int n = intOpt("n", 1000), warmup = intOpt("warmup", 100), size = intOpt("size", 128);
        long timeoutMs = Long.parseLong(opt("timeout-ms", "10000"));
        SynchronousQueue<Long> arrivals = new SynchronousQueue<>();
        DefaultMQPushConsumer c = pushConsumer(opt("group", "rmq_peer_lat_" + System.nanoTime()), "last");
        c.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            long now = System.nanoTime();
            for (MessageExt m : msgs) {
                try { arrivals.offer(Long.parseLong(m.getUserProperty("seq")), 1, TimeUnit.SECONDS); }
                catch (InterruptedException e) { Thread.currentThread().interrupt(); }
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        c.start();
        DefaultMQProducer p = producer();
        byte[] b = new byte[size];
        Arrays.fill(b, (byte) 'x');
        // until the consumer holds its queues: a message sent before it may never arrive
        long seq = 0;
        while (true) {
            Message m = benchMessage(topic, b);
            m.putUserProperty("seq", Long.toString(++seq));
            p.send(m);
            Long got = arrivals.poll(1, TimeUnit.SECONDS);
            if (got != null && got == seq) break;
        }
        double[] lat = new double[n];
        int lost = 0;
        long c0 = 0;
        for (int i = -warmup; i < n; i++) {
            if (i == 0) c0 = cpuNanos();
            Message m = benchMessage(topic, b);
            m.putUserProperty("seq", Long.toString(++seq));
            long t0 = System.nanoTime();
            p.send(m);
            Long got;
            do { got = arrivals.poll(timeoutMs, TimeUnit.MILLISECONDS); } while (got != null && got != seq);
            long t1 = System.nanoTime();
            if (got == null) lost++;
            if (i >= 0) lat[i] = (t1 - t0) / 1e6;
        }
        long c1 = cpuNanos();
        p.shutdown();
        c.shutdown();
        Arrays.sort(lat);
        Map<String, Object> r = event("result");
        r.put("mode", "bench-latency");
        r.put("messages", n);
        r.put("size", size);
        r.put("p50_ms", lat[(int) Math.floor(0.50 * (n - 1))]);
        r.put("p99_ms", lat[(int) Math.floor(0.99 * (n - 1))]);
        r.put("max_ms", lat[n - 1]);
        r.put("mean_ms", Arrays.stream(lat).average().orElse(0));
        r.put("lost", lost);
        r.put("cpu_seconds", (c1 - c0) / 1e9);
        emit(r);
        emit(event("done"));
    }
}
