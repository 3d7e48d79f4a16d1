package graylb.interop.gateway;

import org.springframework.cloud.gateway.route.RouteLocator;
import org.springframework.cloud.gateway.route.builder.RouteLocatorBuilder;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;

/** One route per configured service, to the scheme the gray filter resolves. */
@Configuration
public class Routes {
    @Bean
    public RouteLocator grayRoutes(RouteLocatorBuilder builder, GrayProperties props) {
        RouteLocatorBuilder.Builder routes = builder.routes();
        for (String service : props.getServices()) {
            routes = routes.route(service, r -> r.path("/svc/" + service + "/**")
                    .filters(f -> f.stripPrefix(2))
                    .uri(GrayLoadBalancerClientFilter.SCHEME + "://" + service));
        }
        return routes.build();
    }
}
