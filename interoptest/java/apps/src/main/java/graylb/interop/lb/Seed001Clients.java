package graylb.interop.lb;

import graylb.interop.apps.Seed001;
import org.springframework.cloud.client.ServiceInstance;
import org.springframework.cloud.loadbalancer.core.ReactorLoadBalancer;
import org.springframework.cloud.loadbalancer.core.ServiceInstanceListSupplier;
import org.springframework.cloud.loadbalancer.support.LoadBalancerClientFactory;
import org.springframework.context.annotation.Bean;
import org.springframework.core.env.Environment;

/**
 * Seed 001's load balancer for every client (a child context per service). Outside the scanned
 * package: a load-balancer client configuration must not be a bean of the application's context.
 */
public class Seed001Clients {
    @Bean
    ReactorLoadBalancer<ServiceInstance> seed001Rule(Environment env, LoadBalancerClientFactory factory) {
        String service = env.getProperty(LoadBalancerClientFactory.PROPERTY_NAME);
        return new Seed001.Rule(factory.getLazyProvider(service, ServiceInstanceListSupplier.class),
                env.getProperty("interop.gray-header", "gray"), env.getProperty("interop.gray-key", "gray"));
    }
}
