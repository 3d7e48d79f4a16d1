package graylb.interop.lb;

import graylb.interop.apps.Seed000;
import java.util.List;
import org.springframework.cloud.loadbalancer.core.ServiceInstanceListSupplier;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.context.annotation.Bean;
import org.springframework.core.env.Environment;

/**
 * Seed 000's instance-list supplier for every client (a child context per service): Spring Cloud
 * LoadBalancer's cached list through the filter chain. Outside the scanned package.
 */
public class Seed000Clients {
    @Bean
    ServiceInstanceListSupplier seed000Supplier(ConfigurableApplicationContext ctx, Environment env) {
        ServiceInstanceListSupplier cached = ServiceInstanceListSupplier.builder()
                .withBlockingDiscoveryClient().withCaching().build(ctx);
        List<Seed000.ServerFilter> chain = List.of(new Seed000.GrayFilter(env.getProperty("interop.gray-header", "gray"),
                env.getProperty("interop.gray-key", "gray"), env.getProperty("interop.gray", "false")));
        return new Seed000.Filtered(cached, chain);
    }
}
