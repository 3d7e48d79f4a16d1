package graylb.interop.apps;

import jakarta.servlet.http.HttpServletRequest;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.header.Header;
import org.springframework.beans.factory.annotation.Qualifier;
import org.springframework.beans.factory.annotation.Value;
import org.springframework.context.annotation.Profile;
import org.springframework.kafka.annotation.KafkaListener;
import org.springframework.kafka.core.KafkaTemplate;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RequestParam;
import org.springframework.web.bind.annotation.RestController;
import org.springframework.web.client.RestTemplate;

/**
 * A Spring Kafka producer and consumer, as a Java service of the estate has them. POST
 * /produce?topic=t&n=10&id=x produces n records x-0 .. x-(n-1) with the default partitioner, the
 * incoming gray header copied onto each record as received. The consumer (when
 * interop.kafka.topic is set) calls interop.kafka.next's /chain with the record's gray header
 * passed on, through seed 001's rule, and reports "value|gray header|chain answer" to
 * interop.kafka.report.
 */
@RestController
@Profile("kafka")
public class KafkaApp {
    private final KafkaTemplate<String, String> kafka;
    private final InteropProperties props;
    private final RestTemplate next;
    private final RestTemplate plain = new RestTemplate();
    private final String nextService;
    private final String report;

    public KafkaApp(KafkaTemplate<String, String> kafka, InteropProperties props, @Qualifier("next") RestTemplate next,
                    @Value("${interop.kafka.next:}") String nextService, @Value("${interop.kafka.report:}") String report) {
        this.kafka = kafka;
        this.props = props;
        this.next = next;
        this.nextService = nextService;
        this.report = report;
    }

    @PostMapping("/produce")
    public String produce(@RequestParam String topic, @RequestParam int n, @RequestParam String id, HttpServletRequest req)
            throws Exception {
        String gray = req.getHeader(props.getGrayHeader());
        List<CompletableFuture<?>> sent = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            ProducerRecord<String, String> r = new ProducerRecord<>(topic, id + "-" + i);
            if (gray != null) {
                r.headers().add(props.getRecordGrayHeader(), gray.getBytes(StandardCharsets.UTF_8));
            }
            sent.add(kafka.send(r));
        }
        CompletableFuture.allOf(sent.toArray(new CompletableFuture[0])).get();
        return "produced " + n;
    }

    @KafkaListener(topics = "${interop.kafka.topic:unused}", groupId = "${interop.kafka.group:interop}",
            autoStartup = "${interop.kafka.consume:false}")
    public void consume(ConsumerRecord<String, String> r) {
        Header h = r.headers().lastHeader(props.getRecordGrayHeader());
        String gray = h == null ? "" : new String(h.value(), StandardCharsets.UTF_8);
        String answer = "";
        PassGrayHeader.RECORD.set(gray.isEmpty() ? null : gray);
        try {
            if (!nextService.isEmpty()) {
                answer = next.getForObject("http://" + nextService + "/chain", String.class);
            }
        } finally {
            PassGrayHeader.RECORD.remove();
        }
        if (!report.isEmpty()) {
            plain.postForObject(report, r.value() + "|" + gray + "|" + answer, String.class);
        }
    }
}
