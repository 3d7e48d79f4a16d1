package graylb.interop.gateway;

import java.net.URI;
import org.springframework.cloud.client.ServiceInstance;
import org.springframework.cloud.client.loadbalancer.DefaultRequest;
import org.springframework.cloud.client.loadbalancer.LoadBalancerUriTools;
import org.springframework.cloud.client.loadbalancer.Response;
import org.springframework.cloud.gateway.filter.GatewayFilterChain;
import org.springframework.cloud.gateway.filter.GlobalFilter;
import org.springframework.cloud.gateway.support.DelegatingServiceInstance;
import org.springframework.cloud.gateway.support.NotFoundException;
import org.springframework.cloud.gateway.support.ServerWebExchangeUtils;
import org.springframework.cloud.loadbalancer.core.ServiceInstanceListSupplier;
import org.springframework.cloud.loadbalancer.support.LoadBalancerClientFactory;
import org.springframework.core.Ordered;
import org.springframework.http.HttpHeaders;
import org.springframework.stereotype.Component;
import org.springframework.web.server.ServerWebExchange;
import reactor.core.publisher.Mono;

/**
 * Seed 002's GrayLoadBalancerClientFilter: for a route to the gray scheme, choose an instance with
 * the GrayLoadBalancer over the service's instance list (Spring Cloud LoadBalancer's supplier:
 * the discovery client, cached) and send the request there. Headers go on as received: the
 * decision itself is not written for the next hop.
 */
@Component
public class GrayLoadBalancerClientFilter implements GlobalFilter, Ordered {
    static final String SCHEME = "grayLb";
    /** After RouteToRequestUrlFilter (10000), before the routing filters. */
    static final int ORDER = 10110;

    private final LoadBalancerClientFactory clientFactory;
    private final GrayProperties props;

    public GrayLoadBalancerClientFilter(LoadBalancerClientFactory clientFactory, GrayProperties props) {
        this.clientFactory = clientFactory;
        this.props = props;
    }

    @Override
    public Mono<Void> filter(ServerWebExchange exchange, GatewayFilterChain chain) {
        URI url = exchange.getAttribute(ServerWebExchangeUtils.GATEWAY_REQUEST_URL_ATTR);
        if (url == null || !SCHEME.equalsIgnoreCase(url.getScheme())) {
            return chain.filter(exchange);
        }
        ServerWebExchangeUtils.addOriginalRequestUrl(exchange, url);
        GrayLoadBalancer lb = new GrayLoadBalancer(
                clientFactory.getLazyProvider(url.getHost(), ServiceInstanceListSupplier.class), url.getHost(), props);
        return lb.choose(new DefaultRequest<HttpHeaders>(exchange.getRequest().getHeaders()))
                .doOnNext(res -> {
                    if (!res.hasServer()) {
                        throw NotFoundException.create(true, "Unable to find instance for " + url.getHost());
                    }
                    ServiceInstance server = res.getServer();
                    URI http = URI.create("http://" + url.getHost() + (url.getRawPath() == null ? "" : url.getRawPath())
                            + (url.getRawQuery() == null ? "" : "?" + url.getRawQuery()));
                    URI target = LoadBalancerUriTools.reconstructURI(new DelegatingServiceInstance(server, "http"), http);
                    exchange.getAttributes().put(ServerWebExchangeUtils.GATEWAY_REQUEST_URL_ATTR, target);
                })
                .then(chain.filter(exchange));
    }

    @Override
    public int getOrder() {
        return ORDER;
    }
}
