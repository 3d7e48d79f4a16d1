package graylb.interop.gateway;

import org.springframework.boot.SpringApplication;
import org.springframework.boot.autoconfigure.SpringBootApplication;
import org.springframework.boot.context.properties.EnableConfigurationProperties;

/**
 * Seed 002's edge: a Spring Cloud Gateway whose GrayLoadBalancer sends a request to the gray
 * instances of a service when its gray header says true (any letter case) or its user is in the
 * gray-user list, else to the others; an instance is gray when its metadata under the gray key is
 * exactly "true". Routes: /svc/{service}/** to that service, the first two path segments dropped.
 */
@SpringBootApplication
@EnableConfigurationProperties(GrayProperties.class)
public class GatewayApplication {
    public static void main(String[] args) {
        SpringApplication.run(GatewayApplication.class, args);
    }
}
