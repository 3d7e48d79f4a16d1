package graylb.interop.gateway;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ThreadLocalRandom;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.cloud.client.ServiceInstance;
import org.springframework.cloud.client.loadbalancer.DefaultResponse;
import org.springframework.cloud.client.loadbalancer.EmptyResponse;
import org.springframework.cloud.client.loadbalancer.Request;
import org.springframework.cloud.client.loadbalancer.Response;
import org.springframework.cloud.loadbalancer.core.NoopServiceInstanceListSupplier;
import org.springframework.cloud.loadbalancer.core.ReactorServiceInstanceLoadBalancer;
import org.springframework.cloud.loadbalancer.core.ServiceInstanceListSupplier;
import org.springframework.http.HttpHeaders;
import reactor.core.publisher.Mono;

/**
 * Seed 002's GrayLoadBalancer. Instances split by their metadata under the gray key: exactly
 * "true" is gray, anything else normal. No gray instance: a normal one. Else gray when the
 * request's gray header is "true" in any letter case, or its user is in the gray-user list; normal
 * otherwise. The pick within a side is random.
 */
public class GrayLoadBalancer implements ReactorServiceInstanceLoadBalancer {
    private final ObjectProvider<ServiceInstanceListSupplier> suppliers;
    private final String serviceId;
    private final GrayProperties props;

    public GrayLoadBalancer(ObjectProvider<ServiceInstanceListSupplier> suppliers, String serviceId, GrayProperties props) {
        this.suppliers = suppliers;
        this.serviceId = serviceId;
        this.props = props;
    }

    @Override
    @SuppressWarnings("rawtypes")
    public Mono<Response<ServiceInstance>> choose(Request request) {
        HttpHeaders headers = (HttpHeaders) request.getContext();
        ServiceInstanceListSupplier supplier = suppliers.getIfAvailable(NoopServiceInstanceListSupplier::new);
        return supplier.get().next().map(list -> respond(list, headers));
    }

    private Response<ServiceInstance> respond(List<ServiceInstance> instances, HttpHeaders headers) {
        if (instances.isEmpty()) {
            return new EmptyResponse();
        }
        List<ServiceInstance> gray = new ArrayList<>();
        List<ServiceInstance> normal = new ArrayList<>();
        for (ServiceInstance in : instances) {
            if ("true".equals(in.getMetadata().get(props.getGrayKey()))) {
                gray.add(in);
            } else {
                normal.add(in);
            }
        }
        if (gray.isEmpty()) {
            return new DefaultResponse(one(normal));
        }
        if (needsGray(headers)) {
            return new DefaultResponse(one(gray));
        }
        return normal.isEmpty() ? new EmptyResponse() : new DefaultResponse(one(normal));
    }

    private boolean needsGray(HttpHeaders headers) {
        String tag = headers.getFirst(props.getGrayHeader());
        if (tag != null && "true".equalsIgnoreCase(tag)) {
            return true;
        }
        String uid = headers.getFirst(props.getUserHeader());
        return uid != null && props.getGrayUids().contains(uid);
    }

    private static ServiceInstance one(List<ServiceInstance> list) {
        return list.size() == 1 ? list.get(0) : list.get(ThreadLocalRandom.current().nextInt(list.size()));
    }
}
