package graylb.interop.apps;

import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.cloud.client.ServiceInstance;
import org.springframework.cloud.client.loadbalancer.DefaultResponse;
import org.springframework.cloud.client.loadbalancer.EmptyResponse;
import org.springframework.cloud.client.loadbalancer.LoadBalanced;
import org.springframework.cloud.client.loadbalancer.Request;
import org.springframework.cloud.client.loadbalancer.RequestDataContext;
import org.springframework.cloud.client.loadbalancer.Response;
import graylb.interop.lb.Seed001Clients;
import org.springframework.cloud.loadbalancer.annotation.LoadBalancerClients;
import org.springframework.cloud.loadbalancer.core.NoopServiceInstanceListSupplier;
import org.springframework.cloud.loadbalancer.core.ReactorLoadBalancer;
import org.springframework.cloud.loadbalancer.core.ReactorServiceInstanceLoadBalancer;
import org.springframework.cloud.loadbalancer.core.ServiceInstanceListSupplier;
import org.springframework.cloud.loadbalancer.support.LoadBalancerClientFactory;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.context.annotation.Profile;
import org.springframework.core.env.Environment;
import org.springframework.http.HttpHeaders;
import org.springframework.web.client.RestTemplate;
import reactor.core.publisher.Mono;

/**
 * Seed 001: a Spring Cloud LoadBalancer rule on the gray tag. A request whose outgoing gray
 * header is exactly "true" goes to instances whose metadata under the gray key is exactly "true"
 * (all of them when there is none); any other request to the instances whose metadata is not
 * exactly "true". Round robin. The tag is passed on to the next call as received. Letter case
 * counts: "TRUE" is not "true" here.
 */
@Configuration
@Profile({"seed001", "kafka"})
@LoadBalancerClients(defaultConfiguration = Seed001Clients.class)
public class Seed001 {
    @Bean
    @LoadBalanced
    RestTemplate next(InteropProperties props) {
        RestTemplate rt = new RestTemplate();
        rt.getInterceptors().add(new PassGrayHeader(props.getGrayHeader()));
        return rt;
    }

    public static final class Rule implements ReactorServiceInstanceLoadBalancer {
        private final ObjectProvider<ServiceInstanceListSupplier> suppliers;
        private final String header;
        private final String key;
        private final AtomicInteger position = new AtomicInteger();

        public Rule(ObjectProvider<ServiceInstanceListSupplier> suppliers, String header, String key) {
            this.suppliers = suppliers;
            this.header = header;
            this.key = key;
        }

        @Override
        @SuppressWarnings("rawtypes")
        public Mono<Response<ServiceInstance>> choose(Request request) {
            ServiceInstanceListSupplier s = suppliers.getIfAvailable(NoopServiceInstanceListSupplier::new);
            return s.get(request).next().map(list -> respond(list, request));
        }

        @SuppressWarnings("rawtypes")
        private Response<ServiceInstance> respond(List<ServiceInstance> instances, Request request) {
            if (instances.isEmpty()) {
                return new EmptyResponse();
            }
            HttpHeaders headers = ((RequestDataContext) request.getContext()).getClientRequest().getHeaders();
            List<String> tag = headers.get(header);
            if (tag != null && !tag.isEmpty() && tag.get(0).equals("true")) {
                List<ServiceInstance> gray = instances.stream().filter(s -> "true".equals(s.getMetadata().get(key))).toList();
                if (!gray.isEmpty()) {
                    instances = gray;
                }
            } else {
                instances = instances.stream().filter(s -> !"true".equals(s.getMetadata().get(key))).toList();
            }
            if (instances.isEmpty()) {
                return new EmptyResponse();
            }
            int pos = position.incrementAndGet() & Integer.MAX_VALUE;
            return new DefaultResponse(instances.get(pos % instances.size()));
        }
    }
}
