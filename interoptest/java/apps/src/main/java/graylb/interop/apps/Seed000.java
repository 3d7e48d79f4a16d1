package graylb.interop.apps;

import java.util.ArrayList;
import java.util.HashSet;
import java.util.Iterator;
import java.util.List;
import java.util.Locale;
import java.util.Set;
import org.springframework.cloud.client.ServiceInstance;
import org.springframework.cloud.client.loadbalancer.LoadBalanced;
import org.springframework.cloud.client.loadbalancer.Request;
import graylb.interop.lb.Seed000Clients;
import org.springframework.cloud.loadbalancer.annotation.LoadBalancerClients;
import org.springframework.cloud.loadbalancer.core.DelegatingServiceInstanceListSupplier;
import org.springframework.cloud.loadbalancer.core.ServiceInstanceListSupplier;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.context.annotation.Profile;
import org.springframework.core.env.Environment;
import org.springframework.web.client.RestTemplate;
import reactor.core.publisher.Flux;

/**
 * Seed 000: the caching instance-list supplier of Spring Cloud LoadBalancer, wrapped so that its
 * list runs through an ordered filter chain before the default round robin picks; the one filter
 * is the gray filter. The request's value is the first non-empty of the incoming request's gray
 * header (its ContextHandler), a request-scoped parameter, and the service's own flag
 * (SERVER_GRAY: its own registration metadata). Values are compared in any letter case; anything
 * but true/false counts as false. A prod request reaches prod instances only; a gray one gray
 * instances, or every instance when the list holds no gray one.
 */
@Configuration
@Profile("seed000")
@LoadBalancerClients(defaultConfiguration = Seed000Clients.class)
public class Seed000 {
    /** The request-scoped parameter holder (seed 000's BaseParameterHolder). */
    static final ThreadLocal<String> PARAMETER = new ThreadLocal<>();

    @Bean
    @LoadBalanced
    RestTemplate next(InteropProperties props) {
        RestTemplate rt = new RestTemplate();
        rt.getInterceptors().add(new PassGrayHeader(props.getGrayHeader()));
        return rt;
    }

    /** ExtCachingServiceInstanceListSupplier: the cached list, filtered per request. */
    public static final class Filtered extends DelegatingServiceInstanceListSupplier {
        private final List<ServerFilter> chain;

        public Filtered(ServiceInstanceListSupplier delegate, List<ServerFilter> chain) {
            super(delegate);
            this.chain = chain;
        }

        @Override
        public Flux<List<ServiceInstance>> get() {
            return getDelegate().get().map(list -> {
                List<ServiceInstance> all = new ArrayList<>(list);
                for (ServerFilter f : chain) {
                    f.filter(all);
                }
                return all;
            });
        }

        @Override
        @SuppressWarnings("rawtypes")
        public Flux<List<ServiceInstance>> get(Request request) {
            return get();
        }
    }

    /** AbstractServerFilter: removes the instances doFilter refuses. */
    public abstract static class ServerFilter {
        public void filter(List<ServiceInstance> servers) {
            List<ServiceInstance> all = List.copyOf(servers);
            Iterator<ServiceInstance> it = servers.iterator();
            while (it.hasNext()) {
                if (!doFilter(all, it.next())) {
                    it.remove();
                }
            }
        }

        abstract boolean doFilter(List<ServiceInstance> servers, ServiceInstance server);
    }

    /** ServerGrayFilter. */
    public static final class GrayFilter extends ServerFilter {
        private final String header;
        private final String key;
        private final String serverGray;

        public GrayFilter(String header, String key, String serverGray) {
            this.header = header;
            this.key = key;
            this.serverGray = serverGray;
        }

        private static String norm(String v) {
            if (v == null) {
                return "false";
            }
            String l = v.toLowerCase(Locale.ROOT);
            return l.equals("true") || l.equals("false") ? l : "false";
        }

        @Override
        boolean doFilter(List<ServiceInstance> servers, ServiceInstance server) {
            String req = IncomingHeader.get(header);
            if (req == null || req.isEmpty()) {
                req = PARAMETER.get();
            }
            if (req == null || req.isEmpty()) {
                req = PassGrayHeader.RECORD.get();
            }
            if (req == null || req.isEmpty()) {
                req = serverGray;
            }
            req = norm(req);
            String meta = norm(server.getMetadata().get(key));
            if (meta.equals(req)) {
                return true;
            }
            if (req.equals("true")) {
                Set<String> kinds = new HashSet<>();
                for (ServiceInstance s : servers) {
                    kinds.add(norm(s.getMetadata().get(key)));
                }
                return !kinds.contains("true");
            }
            return false;
        }
    }
}
