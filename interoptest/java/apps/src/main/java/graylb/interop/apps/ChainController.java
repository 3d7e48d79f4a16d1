package graylb.interop.apps;

import jakarta.servlet.http.HttpServletRequest;
import java.util.concurrent.atomic.AtomicLong;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.beans.factory.annotation.Value;
import org.springframework.web.bind.annotation.GetMapping;
import org.springframework.web.bind.annotation.RequestParam;
import org.springframework.web.bind.annotation.RestController;
import org.springframework.web.client.RestTemplate;

/**
 * One hop of a chain: GET /chain?next=b,c answers "name@kind" followed, when next names more
 * services, by ",", then what the first of them answered to /chain?next=c (a call through the
 * application's load balancer, its gray header passed on as the seed passes it). The Go tests
 * read the kinds along the chain. GET /served says how many requests this instance served.
 */
@RestController
public class ChainController {
    private final String name;
    private final InteropProperties props;
    private final ObjectProvider<RestTemplate> next;
    private final AtomicLong served = new AtomicLong();

    public ChainController(@Value("${spring.application.name}") String name, InteropProperties props,
                           ObjectProvider<RestTemplate> next) {
        this.name = name;
        this.props = props;
        this.next = next;
    }

    @GetMapping("/chain")
    public String chain(@RequestParam(name = "next", defaultValue = "") String nextHops, HttpServletRequest req) {
        served.incrementAndGet();
        String self = name + "@" + (props.isGray() ? "gray" : "prod");
        if (nextHops.isEmpty()) {
            return self;
        }
        int comma = nextHops.indexOf(',');
        String first = comma < 0 ? nextHops : nextHops.substring(0, comma);
        String rest = comma < 0 ? "" : nextHops.substring(comma + 1);
        RestTemplate rt = next.getIfAvailable();
        if (rt == null) {
            throw new IllegalStateException(name + " calls no service");
        }
        return self + "," + rt.getForObject("http://" + first + "/chain?next=" + rest, String.class);
    }

    @GetMapping("/served")
    public long served() {
        return served.get();
    }
}
